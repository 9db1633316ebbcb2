package mail

import (
	"codeauth/models"

	"gorm.io/gorm"
)

// Enqueue stores d in tx for delivery once tx commits: Prepare, then the store's write.
//
// Temporary: issue 14 removes it (and this file, mail's last import of GORM) once auth's
// transactions are store methods, which write the row Prepare returns themselves.
func (o *Outbox) Enqueue(tx *gorm.DB, d Draft, opts EnqueueOptions) error {
	row, err := o.Prepare(d, opts)
	if err != nil {
		return err
	}
	return models.EnqueueOutbox(tx, row)
}
