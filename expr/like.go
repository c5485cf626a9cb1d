package expr

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/row"
)

// likeToken is one element of a LIKE pattern.
type likeToken struct {
	kind byte // 'l' literal text, '_' one character, '%' any characters
	text string
}

// likeMatcher matches a whole string against a compiled LIKE pattern (as
// Spark's StringUtils.escapeLikeRegex then a DOTALL regex: _ is one
// character, % any run, the escape makes the next _, % or escape literal).
type likeMatcher struct {
	toks []likeToken
	// fast paths
	mode  byte // 'e' equal, 'p' prefix, 's' suffix, 'c' contains, 0 general
	fixed string
}

func compileLike(pattern string, escape rune) (*likeMatcher, error) {
	var toks []likeToken
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			toks = append(toks, likeToken{kind: 'l', text: lit.String()})
			lit.Reset()
		}
	}
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == escape:
			if i+1 >= len(rs) {
				return nil, fmt.Errorf("the pattern '%s' is invalid: it ends with the escape character", pattern)
			}
			n := rs[i+1]
			if n != '_' && n != '%' && n != escape {
				return nil, fmt.Errorf("the pattern '%s' is invalid: the escape character is not allowed to precede '%c'", pattern, n)
			}
			lit.WriteRune(n)
			i++
		case c == '_':
			flush()
			toks = append(toks, likeToken{kind: '_'})
		case c == '%':
			flush()
			if len(toks) == 0 || toks[len(toks)-1].kind != '%' {
				toks = append(toks, likeToken{kind: '%'})
			}
		default:
			lit.WriteRune(c)
		}
	}
	flush()
	m := &likeMatcher{toks: toks}
	switch {
	case len(toks) == 0:
		m.mode, m.fixed = 'e', ""
	case len(toks) == 1 && toks[0].kind == 'l':
		m.mode, m.fixed = 'e', toks[0].text
	case len(toks) == 2 && toks[0].kind == 'l' && toks[1].kind == '%':
		m.mode, m.fixed = 'p', toks[0].text
	case len(toks) == 2 && toks[0].kind == '%' && toks[1].kind == 'l':
		m.mode, m.fixed = 's', toks[1].text
	case len(toks) == 3 && toks[0].kind == '%' && toks[1].kind == 'l' && toks[2].kind == '%':
		m.mode, m.fixed = 'c', toks[1].text
	}
	return m, nil
}

func (m *likeMatcher) match(s string) bool {
	switch m.mode {
	case 'e':
		return s == m.fixed
	case 'p':
		return strings.HasPrefix(s, m.fixed)
	case 's':
		return strings.HasSuffix(s, m.fixed)
	case 'c':
		return strings.Contains(s, m.fixed)
	}
	return likeMatch(m.toks, s)
}

// likeMatch matches tokens against s with backtracking to the last %.
func likeMatch(toks []likeToken, s string) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for {
		if ti < len(toks) {
			t := toks[ti]
			switch t.kind {
			case '%':
				starT, starS = ti, si
				ti++
				continue
			case '_':
				if si < len(s) {
					_, n := utf8.DecodeRuneInString(s[si:])
					si += n
					ti++
					continue
				}
			case 'l':
				if strings.HasPrefix(s[si:], t.text) {
					si += len(t.text)
					ti++
					continue
				}
			}
		} else if si == len(s) {
			return true
		}
		if starT < 0 || starS >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		ti, si = starT+1, starS
	}
}

func compileLikeExpr(e *Expr, env Env) (fn, error) {
	a, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	esc, _ := utf8.DecodeRuneInString(e.Val.S)
	if p := e.Args[1]; p.Op == OpLiteral {
		if p.Val.Kind == row.Null {
			return func(row.Row) (row.Value, error) { return null, nil }, nil
		}
		m, err := compileLike(p.Val.S, esc)
		if err != nil {
			return nil, err
		}
		return func(r row.Row) (row.Value, error) {
			v, err := a(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			return boolV(m.match(v.S)), nil
		}, nil
	}
	pf, err := compile(e.Args[1], env)
	if err != nil {
		return nil, err
	}
	text := e.String()
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		if err != nil || v.Kind == row.Null {
			return null, err
		}
		p, err := pf(r)
		if err != nil || p.Kind == row.Null {
			return null, err
		}
		m, err := compileLike(p.S, esc)
		if err != nil {
			return null, &EvalError{Expr: text, Reason: err.Error()}
		}
		return boolV(m.match(v.S)), nil
	}, nil
}
