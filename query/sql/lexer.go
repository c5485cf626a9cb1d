package sql

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a position in the SQL text: 1-based line and column (in
// characters).
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is a syntax error or a refused construct: where, what, and why.
type Error struct {
	Pos Pos
	// Construct names what was refused or where the syntax broke, as
	// written ("ORDER BY", "'FROM'").
	Construct string
	Reason    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d:%d: %s: %s", e.Pos.Line, e.Pos.Col, e.Construct, e.Reason)
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQuoted // backquoted identifier
	tString
	tNumber
	tOp
)

type token struct {
	kind tokKind
	text string // identifier (as written), operator, number text, or the string's value
	pos  Pos
	raw  string // the token as written
}

func (t token) is(kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return t.raw
	}
	return "'" + t.raw + "'"
}

// lex splits src into tokens.
func lex(src string) ([]token, error) {
	var toks []token
	line, col := 1, 1
	i := 0
	advance := func(n int) {
		for k := 0; k < n && i < len(src); {
			r, size := utf8.DecodeRuneInString(src[i:])
			if r == '\n' {
				line++
				col = 1
			} else {
				col++
			}
			i += size
			k += size
		}
	}
	for i < len(src) {
		c := src[i]
		start := Pos{line, col}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			advance(1)
		case strings.HasPrefix(src[i:], "--"):
			for i < len(src) && src[i] != '\n' {
				advance(1)
			}
		case strings.HasPrefix(src[i:], "/*"):
			depth := 0
			for {
				if i >= len(src) {
					return nil, &Error{Pos: start, Construct: "/*", Reason: "the comment is not closed: end it with */"}
				}
				if strings.HasPrefix(src[i:], "/*") {
					depth++
					advance(2)
					continue
				}
				if strings.HasPrefix(src[i:], "*/") {
					depth--
					advance(2)
					if depth == 0 {
						break
					}
					continue
				}
				advance(1)
			}
		case c == '`':
			j := i + 1
			var b strings.Builder
			for {
				if j >= len(src) {
					return nil, &Error{Pos: start, Construct: "`", Reason: "the quoted identifier is not closed: end it with `"}
				}
				if src[j] == '`' {
					if j+1 < len(src) && src[j+1] == '`' {
						b.WriteByte('`')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			raw := src[i : j+1]
			toks = append(toks, token{kind: tQuoted, text: b.String(), pos: start, raw: raw})
			advance(j + 1 - i)
		case c == '\'' || c == '"' || ((c == 'r' || c == 'R') && i+1 < len(src) && (src[i+1] == '\'' || src[i+1] == '"')):
			rawStr := c == 'r' || c == 'R'
			q := i
			if rawStr {
				q++
			}
			quote := src[q]
			j := q + 1
			for {
				if j >= len(src) {
					return nil, &Error{Pos: start, Construct: "string literal", Reason: fmt.Sprintf("the string is not closed: end it with %c", quote)}
				}
				if src[j] == '\\' && !rawStr {
					j += 2
					continue
				}
				if src[j] == quote {
					break
				}
				j++
			}
			raw := src[i : j+1]
			body := src[q+1 : j]
			val := body
			if !rawStr {
				val = unescape(body)
			}
			toks = append(toks, token{kind: tString, text: val, pos: start, raw: raw})
			advance(j + 1 - i)
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9'):
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && src[k] >= '0' && src[k] <= '9' {
					for k < len(src) && src[k] >= '0' && src[k] <= '9' {
						k++
					}
					j = k
				}
			}
			// Suffixes: L, S, Y, D, F, BD.
			if j+1 < len(src) && strings.EqualFold(src[j:j+2], "BD") && (j+2 >= len(src) || !isIdentChar(rune(src[j+2]))) {
				j += 2
			} else if j < len(src) && strings.ContainsRune("LlSsYyDdFf", rune(src[j])) && (j+1 >= len(src) || !isIdentChar(rune(src[j+1]))) {
				j++
			}
			if j < len(src) && isIdentChar(rune(src[j])) {
				// 1abc: Spark reads identifiers that start with digits; we do not.
				k := j
				for k < len(src) && isIdentChar(rune(src[k])) {
					k++
				}
				return nil, &Error{Pos: start, Construct: "'" + src[i:k] + "'", Reason: "is neither a number nor an identifier: quote an identifier that starts with a digit in backquotes"}
			}
			toks = append(toks, token{kind: tNumber, text: src[i:j], pos: start, raw: src[i:j]})
			advance(j - i)
		case isIdentStart(c, src[i:]):
			j := i
			for j < len(src) {
				r, size := utf8.DecodeRuneInString(src[j:])
				if !isIdentChar(r) {
					break
				}
				j += size
			}
			toks = append(toks, token{kind: tIdent, text: src[i:j], pos: start, raw: src[i:j]})
			advance(j - i)
		default:
			op := ""
			for _, o := range []string{"<=>", "<>", "!=", "<=", ">=", "==", "||", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".", "[", "]", ";", "&", "|", "^", "~", "!", ":"} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, &Error{Pos: start, Construct: fmt.Sprintf("'%c'", r), Reason: "is not a character Spark SQL takes here"}
			}
			toks = append(toks, token{kind: tOp, text: op, pos: start, raw: op})
			advance(len(op))
		}
	}
	toks = append(toks, token{kind: tEOF, pos: Pos{line, col}})
	return toks, nil
}

func isIdentStart(c byte, rest string) bool {
	if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return true
	}
	if c >= utf8.RuneSelf {
		r, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLetter(r)
	}
	return false
}

func isIdentChar(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// unescape is Spark's ParserUtils.unescapeSQLString for the text between
// the quotes: \0 \b \n \r \t \Z (Ctrl-Z), \uXXXX, three octal digits, \%
// and \_ kept with their backslash (for LIKE), any other \c is c.
func unescape(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		n := s[i+1]
		switch {
		case n == 'u' && i+5 < len(s)+0 && i+6 <= len(s) && isHex(s[i+2:i+6]):
			v, _ := strconv.ParseUint(s[i+2:i+6], 16, 32)
			b.WriteRune(rune(v))
			i += 5
			continue
		case n >= '0' && n <= '3' && i+4 <= len(s) && isOctal(s[i+1:i+4]):
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 32)
			b.WriteRune(rune(v))
			i += 3
			continue
		}
		switch n {
		case '0':
			b.WriteByte(0)
		case 'b':
			b.WriteByte('\b')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'Z':
			b.WriteByte(0x1a)
		case '%', '_':
			b.WriteByte('\\')
			b.WriteByte(n)
		default:
			b.WriteByte(n)
		}
		i++
	}
	return b.String()
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func isOctal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
