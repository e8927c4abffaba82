package migrator

import "strings"

// topLevelStatements splits a migration file into its statements, each with
// comments, string literals and dollar-quoted bodies (function bodies, DO
// blocks) left out, so that a statement's words can be matched without
// mistaking text inside a function for a statement of the migration. Quoted
// identifiers are kept as written. It understands the lexical rules
// migrations use; it is not a parser.
func topLevelStatements(sql string) []string {
	return splitStatements(sql, false)
}

// statementsOf splits a migration file into its statements as written
// (comments left out), to be run one at a time.
func statementsOf(sql string) []string {
	return splitStatements(sql, true)
}

// splitStatements splits sql at its top-level semicolons; with keep, string
// literals and dollar-quoted bodies are kept, else replaced by ” and $$.
func splitStatements(sql string, keep bool) []string {
	var stmts []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				i = len(sql)
			} else {
				i += end
			}
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			i = skipBlockComment(sql, i)
			cur.WriteByte(' ')
		case c == '\'':
			escapes := i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i == 1 || !isIdentByte(sql[i-2]))
			end := skipQuoted(sql, i, '\'', escapes)
			if keep {
				cur.WriteString(sql[i:end])
			} else {
				cur.WriteString("''")
			}
			i = end
		case c == '"':
			end := skipQuoted(sql, i, '"', false)
			cur.WriteString(sql[i:end])
			i = end
		case c == '$' && (i == 0 || !isIdentByte(sql[i-1])):
			if tag, ok := dollarTag(sql[i:]); ok {
				body := strings.Index(sql[i+len(tag):], tag)
				end := len(sql)
				if body >= 0 {
					end = i + len(tag) + body + len(tag)
				}
				if keep {
					cur.WriteString(sql[i:end])
				} else {
					cur.WriteString("$$")
				}
				i = end
				continue
			}
			cur.WriteByte(c)
			i++
		case c == ';':
			flush()
			i++
		default:
			cur.WriteByte(c)
			i++
		}
	}
	flush()
	return stmts
}

// skipBlockComment returns the index just past the /* comment */ starting
// at i; PostgreSQL's block comments nest.
func skipBlockComment(sql string, i int) int {
	depth := 0
	for i < len(sql) {
		switch {
		case strings.HasPrefix(sql[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(sql[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// skipQuoted returns the index just past the literal or identifier quoted
// with q that starts at i: a doubled q stands for itself, and in an E'...'
// string a backslash escapes the next byte.
func skipQuoted(sql string, i int, q byte, backslashEscapes bool) int {
	for i++; i < len(sql); i++ {
		switch {
		case backslashEscapes && sql[i] == '\\':
			i++
		case sql[i] == q && i+1 < len(sql) && sql[i+1] == q:
			i++
		case sql[i] == q:
			return i + 1
		}
	}
	return i
}

// dollarTag returns the opening $tag$ of a dollar-quoted string at the start
// of s. A $ followed by a digit is a parameter ($1), not a quote.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case isIdentByte(c) && c != '$' && (j > 1 || c < '0' || c > '9'):
		default:
			return "", false
		}
	}
	return "", false
}

// isIdentByte reports whether c may continue an unquoted identifier.
func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}
