package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"codeauth/auth"
	"codeauth/models"
	"codeauth/server"
)

// cmdUsers is the command that does the admin API's tasks from a shell, for operators:
//
//	codeauth users list [-search TEXT] [-limit N] [-offset N]
//	codeauth users show ID|EMAIL
//	codeauth users ban ID|EMAIL [-reason TEXT] [-for DURATION]
//	codeauth users unban ID|EMAIL
//	codeauth users revoke ID|EMAIL        end every session of the account
//	codeauth users remove ID|EMAIL        erase the account now (no grace period)
//	codeauth users set-role ID|EMAIL ROLE  admin, user, or both: admin,user
//
// It acts with the operator's authority (auth.Service.Operator): the same rules as an admin's,
// each change written to the audit log with no actor.
const cmdUsers = "users"

// usersUsage is the command's help.
const usersUsage = `usage: codeauth users list [-search TEXT] [-limit N] [-offset N]
       codeauth users show|unban|revoke|remove ID|EMAIL
       codeauth users ban ID|EMAIL [-reason TEXT] [-for DURATION]
       codeauth users set-role ID|EMAIL admin|user|admin,user`

// runUsers runs `codeauth users …` on srv, writing its answers to out and its errors to errOut.
func runUsers(ctx context.Context, srv *server.Server, args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(errOut, usersUsage)
		return 2
	}
	a := srv.Auth
	op := a.Operator()
	task, rest := args[0], args[1:]
	fs := flag.NewFlagSet("users "+task, flag.ContinueOnError)
	fs.SetOutput(errOut)
	search := fs.String("search", "", "text to find in the address or the name")
	limit := fs.Int("limit", 50, "accounts to list")
	offset := fs.Int("offset", 0, "accounts to skip")
	reason := fs.String("reason", "", "why the account is banned")
	var banFor time.Duration
	fs.Func("for", "how long the ban lasts, such as 24h or 90m, at least 1s (0: until lifted)", func(s string) (err error) {
		banFor, err = auth.ParseBanLength(s)
		return err
	})
	// The account comes first, the flags after it, as operators type it.
	var target []string
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		target, rest = append(target, rest[0]), rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	target = append(target, fs.Args()...)
	fail := func(err error) int {
		fmt.Fprintln(errOut, "codeauth users "+task+":", describe(err))
		return 1
	}
	if task == "list" {
		q := models.UserQuery{Limit: *limit, Offset: *offset}
		if *search != "" {
			q.Where = []models.UserCondition{{Field: models.UserFieldEmail, Op: models.OpContains, Value: *search}}
		}
		users, total, _, err := a.ListUsers(ctx, op, q)
		if err != nil {
			return fail(err)
		}
		printUsers(out, users)
		fmt.Fprintf(out, "%d of %d\n", len(users), total)
		return 0
	}
	wantArgs := 1
	switch task {
	case "show", "ban", "unban", "revoke", "remove":
	case "set-role":
		wantArgs = 2
	default:
		fmt.Fprintln(errOut, usersUsage)
		return 2
	}
	if len(target) != wantArgs {
		fmt.Fprintln(errOut, usersUsage)
		return 2
	}
	// remove erases an account in its deletion grace period too; the others act on live ones.
	user, err := a.FindAccount(ctx, op, target[0], task == "remove")
	if err != nil {
		return fail(err)
	}
	switch task {
	case "show":
		printUsers(out, []models.User{user})
		sessions, err := a.UserSessions(ctx, op, user.ID)
		if err != nil {
			return fail(err)
		}
		for _, s := range sessions {
			fmt.Fprintf(out, "session %s  %s  from %s  since %s\n", s.ID, auth.DeviceOf(s.UserAgent).Name(), s.IPAddress, s.CreatedAt.Format(time.RFC3339))
		}
		return 0
	case "ban":
		user, err = a.BanUser(ctx, op, user.ID, *reason, banFor)
	case "unban":
		user, err = a.UnbanUser(ctx, op, user.ID)
	case "revoke":
		err = a.RevokeUserSessions(ctx, op, user.ID)
	case "remove":
		err = a.RemoveUser(ctx, op, user.ID)
	case "set-role":
		user, err = a.SetRole(ctx, op, user.ID, strings.Split(target[1], ","))
	}
	if err != nil {
		return fail(err)
	}
	if task == "revoke" || task == "remove" {
		fmt.Fprintf(out, "%s: done for %s\n", task, user.Email)
		return 0
	}
	printUsers(out, []models.User{user})
	return 0
}

// printUsers writes accounts as an aligned table.
func printUsers(out io.Writer, users []models.User) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tE-MAIL\tNAME\tROLE\tBANNED\tCREATED")
	for _, u := range users {
		banned := "no"
		if u.Banned {
			banned = "yes"
			if u.BanExpires != nil {
				banned = "until " + u.BanExpires.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.ID, u.Email, u.Name, u.Role, banned, u.CreatedAt.Format(time.RFC3339))
	}
	w.Flush()
}

// describe words an error of the admin rules for an operator.
func describe(err error) string {
	switch {
	case errors.Is(err, auth.ErrNoSuchUser):
		return "no such account"
	case errors.Is(err, auth.ErrUnknownRole):
		return "unknown role: use admin, user or admin,user"
	case errors.Is(err, auth.ErrInvalidEmail):
		return "not an e-mail address"
	case errors.Is(err, auth.ErrInvalidBanLength):
		return "-for cannot be negative (0 bans for good)"
	}
	return err.Error()
}
