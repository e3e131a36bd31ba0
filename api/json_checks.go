package api

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// duplicateKey returns the first key an object of body names twice, or
// "". Go's decoder keeps the last of duplicates and matches struct fields
// case-insensitively, so {"topic":"a","TOPIC":"b"} would be read as one
// thing by kmirror and as another by a proxy or a log reader in front of
// it: keys equal but for case count as duplicates too. body is valid JSON
// (decoded before this runs).
func duplicateKey(body []byte) string {
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			folded := strings.ToLower(key)
			if top.keys[folded] {
				return key
			}
			top.keys[folded] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				continue
			}
			top = stack[len(stack)-1]
		}
		// A value ended: the enclosing object's next token is a key.
		if top != nil && top.object {
			top.wantKey = true
		}
	}
}

// badTextField names the first string of a decoded request that
// PostgreSQL cannot store as text (a NUL byte, SQLSTATE 22021/22P05), or
// returns "". The decoder has already replaced invalid UTF-8 with U+FFFD.
func badTextField(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.String:
		if hasBadText(v.String()) {
			return cmpPath(path)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badTextField(v.Elem(), path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if bad := badTextField(v.Field(i), joinPath(path, name)); bad != "" {
				return bad
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			p := joinPath(path, iter.Key().String())
			if bad := badTextField(iter.Key(), p); bad != "" {
				return bad
			}
			if bad := badTextField(iter.Value(), p); bad != "" {
				return bad
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // []byte: binary, never stored as text
		}
		for i := range v.Len() {
			if bad := badTextField(v.Index(i), path+"["+strconv.Itoa(i)+"]"); bad != "" {
				return bad
			}
		}
	}
	return ""
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func cmpPath(path string) string {
	if path == "" {
		return "the request body"
	}
	return path
}

// hasBadText reports a string PostgreSQL cannot store as text: a NUL byte
// or invalid UTF-8.
func hasBadText(s string) bool {
	return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)
}
