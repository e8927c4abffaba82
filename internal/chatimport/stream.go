package chatimport

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

// Each calls fn with each conversation of the JSON text r holds, in order:
// the elements of a top-level array (conversations.json, a shard, an Open
// WebUI export), the elements of a top-level object's "conversations" array
// (the shape some tools write; the object's other members are ignored), or
// else the top-level object itself, as one conversation. It decodes one
// conversation at a time, so it holds one conversation and the decoder's
// buffer, never the file. An error of fn stops it and is returned as is.
// A text with no JSON value (empty, or whitespace) is ErrEmpty.
func Each(r io.Reader, fn func(index int, conversation json.RawMessage) error) error {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err == io.EOF {
		return ErrEmpty
	}
	if err != nil {
		return fmt.Errorf("reading the JSON: %w", err)
	}
	switch tok {
	case json.Delim('['):
		err = eachElement(dec, fn)
	case json.Delim('{'):
		err = eachMember(dec, fn)
	default:
		return fmt.Errorf("the JSON is a %T, not an array of conversations or a conversation", tok)
	}
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more JSON after the first value")
	}
	return nil
}

// eachElement calls fn with each element of the array whose [ dec has just
// read, then reads the ].
func eachElement(dec *json.Decoder, fn func(int, json.RawMessage) error) error {
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("reading conversation %d: %w", i, err)
		}
		if err := fn(i, raw); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// eachMember reads the object whose { dec has just read: a member
// "conversations" that is an array is streamed; without one, the object,
// rebuilt member by member, is one conversation.
func eachMember(dec *json.Decoder, fn func(int, json.RawMessage) error) error {
	one := bytes.NewBufferString("{")
	streamed := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("reading the JSON: %w", err)
		}
		key := tok.(string) // an object's members start with their key
		if key == "conversations" && !streamed {
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return fmt.Errorf("the top-level member \"conversations\" is not an array (%v)", err)
			}
			if err := eachElement(dec, fn); err != nil {
				return err
			}
			streamed = true
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("reading member %q: %w", key, err)
		}
		if one.Len() > 1 {
			one.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		one.Write(k)
		one.WriteByte(':')
		one.Write(raw)
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if streamed {
		return nil
	}
	one.WriteByte('}')
	return fn(0, one.Bytes())
}

// text is one JSON text of an export: a file, or a member of a zip.
type text struct {
	name string // as the summary names it
	size int64  // its bytes (uncompressed), for the progress bar
	open func() (io.ReadCloser, error)
	path string // as a refusal of the whole file names it: the path given, or the member and its directory or zip
}

// shardName matches conversations.json and conversations-NNN.json.
var shardName = regexp.MustCompile(`^conversations(?:-([0-9]+))?\.json$`)

// texts lists the JSON texts of the export at p: the file itself; for
// ChatGPT, also a directory or a .zip, read for its conversations-NNN.json
// shards in their order, else its conversations.json. The closer closes the
// zip.
func texts(format, p string) ([]text, io.Closer, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, err
	}
	isZip := !fi.IsDir() && filepath.Ext(p) == ".zip"
	if !fi.IsDir() && !isZip {
		return []text{{filepath.Base(p), fi.Size(), func() (io.ReadCloser, error) { return os.Open(p) }, p}}, nil, nil
	}
	if format != "chatgpt" {
		return nil, nil, fmt.Errorf("%s: %s is one JSON file, not a directory or a zip (only a ChatGPT export comes in shards)", p, Name(format))
	}
	var all []text
	var closer io.Closer
	if isZip {
		z, err := zip.OpenReader(p)
		if err != nil {
			return nil, nil, err
		}
		closer = z
		for _, f := range z.File {
			if !f.FileInfo().IsDir() {
				all = append(all, text{f.Name, int64(f.UncompressedSize64), f.Open, f.Name + " in " + p})
			}
		}
	} else {
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			name := filepath.Join(p, e.Name())
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				all = append(all, text{e.Name(), info.Size(), func() (io.ReadCloser, error) { return os.Open(name) }, name})
			}
		}
	}
	shards, whole := pickShards(all)
	if len(shards) == 0 {
		shards = whole
	}
	if len(shards) == 0 {
		if closer != nil {
			closer.Close()
		}
		return nil, nil, fmt.Errorf("%s holds no conversations-NNN.json and no conversations.json", p)
	}
	return shards, closer, nil
}

// pickShards splits all into the conversations-NNN.json shards, by number,
// and the conversations.json files.
func pickShards(all []text) (shards, whole []text) {
	number := map[string]int{}
	for _, t := range all {
		m := shardName.FindStringSubmatch(path.Base(t.name))
		switch {
		case m == nil:
		case m[1] == "":
			whole = append(whole, t)
		default:
			number[t.name], _ = strconv.Atoi(m[1])
			shards = append(shards, t)
		}
	}
	sort.SliceStable(shards, func(i, j int) bool { return number[shards[i].name] < number[shards[j].name] })
	return shards, whole
}
