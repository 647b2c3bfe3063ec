package jsonv2_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/jsonv2"
)

type endpoint struct {
	Name   string   `json:"name"`
	Models []string `json:"models"`
	Limit  *int     `json:"limit"`
}

// Contract K3: hostile input is a typed error saying what is wrong where.
func TestK3_UnmarshalRefusesWhatItCannotReadExactly(t *testing.T) {
	for _, c := range []struct {
		in      string
		problem jsonv2.Problem
		text    string
	}{
		{`{"name":"a","name":"b"}`, jsonv2.Repeated, `key "name" is given twice at the top level: give each key once`},
		{`{"x":{"name":"a","name":"b"}}`, jsonv2.Repeated, `key "name" is given twice at /x: give each key once`},
		{`{"Name":"a"}`, jsonv2.Unknown, `unknown key "Name" at the top level (keys are case-sensitive)`},
		{`{"x":{"nam":"a"}}`, jsonv2.Unknown, `unknown key "nam" at /x (keys are case-sensitive)`},
		{`{"limit":null}`, jsonv2.Null, `null at /limit: give a value or leave the key out`},
		{`{"models":["a",null]}`, jsonv2.Null, `null at /models/1: give a value or leave the key out`},
		{`{"models":"a"}`, jsonv2.Type, `a JSON string at /models, where an array belongs`},
		{`{"limit":true}`, jsonv2.Type, `a JSON boolean at /limit, where an integer belongs`},
		{`{"limit":1.5}`, jsonv2.Type, ``},
		{`{"name":"a"}x`, jsonv2.Syntax, ``},
		{"{\"name\":\"\xff\"}", jsonv2.Syntax, ``},
	} {
		var err error
		if strings.HasPrefix(c.in, `{"x"`) {
			var m map[string]endpoint
			err = jsonv2.Unmarshal([]byte(c.in), &m)
		} else {
			var e endpoint
			err = jsonv2.Unmarshal([]byte(c.in), &e)
		}
		var jerr *jsonv2.Error
		if !errors.As(err, &jerr) || jerr.Problem != c.problem || c.text != "" && err.Error() != c.text {
			t.Errorf("Unmarshal(%s) = %v; want problem %d %q", c.in, err, c.problem, c.text)
		}
	}
	var e endpoint
	if err := jsonv2.Unmarshal([]byte(` {"name":"a","models":["m"],"limit":2} `), &e); err != nil || e.Name != "a" || *e.Limit != 2 {
		t.Fatalf("a good document: %+v, %v", e, err)
	}
}

// Valid answers as Unmarshal reads; ValidLoose as encoding/json.Valid.
func TestValid(t *testing.T) {
	for in, want := range map[string][2]bool{
		`{"a":1,"a":2}`: {false, true}, "\"\xff\"": {false, true}, ` [1, {}] `: {true, true},
		`{`: {false, false}, `1 2`: {false, false}, ``: {false, false}, `{"a":01}`: {false, false},
	} {
		if got := [2]bool{jsonv2.Valid([]byte(in)), jsonv2.ValidLoose([]byte(in))}; got != want {
			t.Errorf("Valid, ValidLoose(%q) = %v", in, got)
		}
	}
}

// Member reads one member whatever the others are named, with Unmarshal's
// rules for it, and says where a fault is in the whole document.
func TestMember(t *testing.T) {
	var n int
	if found, err := jsonv2.Member([]byte(`{"later":[1],"version":2}`), "version", &n); !found || err != nil || n != 2 {
		t.Fatalf("Member = %v, %v, %d", found, err, n)
	}
	if found, err := jsonv2.Member([]byte(`{"later":1}`), "version", &n); found || err != nil {
		t.Fatalf("Member of an absent name = %v, %v", found, err)
	}
	for in, want := range map[string]string{
		`{"version":"2"}`:           "a JSON string at /version, where an integer belongs",
		`{"version":1,"version":2}`: `key "version" is given twice at the top level: give each key once`,
		`null`:                      "null at the top level: give a value or leave the key out",
	} {
		var jerr *jsonv2.Error
		if _, err := jsonv2.Member([]byte(in), "version", &n); !errors.As(err, &jerr) || err.Error() != want {
			t.Errorf("Member(%s) = %v, want %s", in, err, want)
		}
	}
}

func TestAppendCompact(t *testing.T) {
	got, err := jsonv2.AppendCompact([]byte("x"), []byte(` { "a" : [ 1 , "b c" ] } `))
	if err != nil || string(got) != `x{"a":[1,"b c"]}` {
		t.Fatalf("AppendCompact = %s, %v", got, err)
	}
	if got, err := jsonv2.AppendCompact([]byte("x"), []byte(`{`)); err == nil || string(got) != "x" {
		t.Fatalf("AppendCompact of bad JSON = %s, %v", got, err)
	}
}
