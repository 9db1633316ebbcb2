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
// the model cannot drift apart. It writes the fields as they are: GORM's Create would also fill
// defaults and run hooks, so a model that has either is refused, and a creation or update time
// left zero (which Create would set) is an error.
type insert struct {
	sql    string
	fields []*schema.Field
	name   string
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
	sch := stmt.Schema
	if sch.BeforeCreate || sch.AfterCreate || sch.BeforeSave || sch.AfterSave {
		return nil, fmt.Errorf("models: %s has create hooks, which a written insert would skip", sch.Name)
	}
	ins := &insert{name: sch.Name}
	var cols []string
	for _, name := range sch.DBNames {
		f := sch.FieldsByDBName[name]
		if f.HasDefaultValue || !f.Creatable {
			return nil, fmt.Errorf("models: %s.%s has a default or is not creatable, which a written insert would not honour", sch.Name, f.Name)
		}
		ins.fields = append(ins.fields, f)
		cols = append(cols, name)
	}
	ins.sql = "INSERT INTO " + stmt.Schema.Table + " (" + strings.Join(cols, ", ") + ") VALUES (?" +
		strings.Repeat(", ?", len(cols)-1) + ")"
	inserts.Store(t, ins)
	return ins, nil
}

// values are row's values for the insert's columns.
func (ins *insert) values(db *gorm.DB, row any) ([]any, error) {
	v := reflect.ValueOf(row).Elem()
	out := make([]any, len(ins.fields))
	for i, f := range ins.fields {
		var zero bool
		out[i], zero = f.ValueOf(db.Statement.Context, v)
		if zero && (f.AutoCreateTime != 0 || f.AutoUpdateTime != 0) {
			return nil, fmt.Errorf("models: %s.%s is not set", ins.name, f.Name)
		}
	}
	return out, nil
}
