// Package sql holds pgconvo's SQL. The numbered golang-migrate files
// (NNNN_name.up.sql and NNNN_name.down.sql) live directly in this directory
// and are embedded into the binary; the current text of each object lives in
// functions/, triggers/ and views/ and is checked against the migrations by
// the drift test in tests/.
package sql

import "embed"

// Migrations holds every numbered migration file, at the root of the FS.
//
//go:embed *.sql
var Migrations embed.FS

// Citus holds what `migrate distribute` installs on a Citus coordinator,
// one object a file, in schema convo_node: see docs/scaling.md.
//
//go:embed citus/*.sql
var Citus embed.FS
