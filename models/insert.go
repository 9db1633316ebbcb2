package models

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// insert is the written-out INSERT of a model's table: every column, in the model's order, and
// the fields that fill them. It is made once per model from GORM's schema, so the statement and
// the model cannot drift apart.
type insert struct {
	sql    string
	fields []*schema.Field
}

var inserts sync.Map // reflect.Type of the model → *insert

// insertOf returns the insert of row's model (row is a pointer to a model).
func insertOf(db *gorm.DB, row any) (*insert, error) {
	t := reflect.TypeOf(row)
	if ins, ok := inserts.Load(t); ok {
		return ins.(*insert), nil
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(row); err != nil {
		return nil, fmt.Errorf("models: %T: %w", row, err)
	}
	ins := &insert{}
	var cols []string
	for _, name := range stmt.Schema.DBNames {
		ins.fields = append(ins.fields, stmt.Schema.FieldsByDBName[name])
		cols = append(cols, name)
	}
	ins.sql = "INSERT INTO " + stmt.Schema.Table + " (" + strings.Join(cols, ", ") + ") VALUES (?" +
		strings.Repeat(", ?", len(cols)-1) + ")"
	inserts.Store(t, ins)
	return ins, nil
}

// values are row's values for the insert's columns.
func (ins *insert) values(db *gorm.DB, row any) []any {
	v := reflect.ValueOf(row).Elem()
	out := make([]any, len(ins.fields))
	for i, f := range ins.fields {
		out[i], _ = f.ValueOf(db.Statement.Context, v)
	}
	return out
}
