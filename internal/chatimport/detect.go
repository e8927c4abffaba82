package chatimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The formats are easy to tell apart by one conversation's top-level
// members, so a file given to the wrong verb is refused, whole, naming the
// verb that reads it, instead of each conversation being refused for
// lacking what the verb looks for.

// Detect names the format one conversation of an export is in, by the
// members that format has and the others lack: "pgconvo" (format
// "pgconvo.export", what restore reads), "chatgpt" (a "mapping" object),
// "openwebui" (a "chat" object with "history", or a "history" object),
// "librechat" (a "messages" array of messages with messageId or
// parentMessageId, or with a conversationId beside it); "" for none of them.
func Detect(conversation []byte) string {
	var c map[string]json.RawMessage
	if json.Unmarshal(conversation, &c) != nil {
		return "" // not an object
	}
	var format string
	var chat map[string]json.RawMessage
	var messages []json.RawMessage
	switch {
	case json.Unmarshal(c["format"], &format) == nil && format == "pgconvo.export":
		return "pgconvo"
	case isObject(c["mapping"]):
		return "chatgpt"
	case isObject(c["history"]),
		json.Unmarshal(c["chat"], &chat) == nil && isObject(chat["history"]):
		return "openwebui"
	case json.Unmarshal(c["messages"], &messages) == nil && messages != nil &&
		(c["conversationId"] != nil || len(messages) > 0 && hasMessageID(messages[0])):
		return "librechat"
	}
	return ""
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &m) == nil
}

// hasMessageID reports whether a message has LibreChat's messageId or
// parentMessageId.
func hasMessageID(message json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(message, &m) != nil {
		return false
	}
	_, id := m["messageId"]
	_, parent := m["parentMessageId"]
	return id || parent
}

// DetectFile names the format of the first conversation of the export r
// holds (as Each reads it): Detect's answer, "" for an export with no
// conversation or one Detect does not know. The error is Each's: ErrEmpty,
// or JSON it cannot read.
func DetectFile(r io.Reader) (string, error) {
	format := ""
	err := Each(r, func(_ int, conversation json.RawMessage) error {
		format = Detect(conversation)
		return errFirstSeen
	})
	if errors.Is(err, errFirstSeen) {
		err = nil
	}
	return format, err
}

// errFirstSeen stops DetectFile after the first conversation.
var errFirstSeen = errors.New("first conversation seen")

// ErrEmpty is a file with no JSON in it: 0 bytes, or only whitespace.
var ErrEmpty = errors.New("the file is empty")

// Name is how a message names a format, with its article: "a ChatGPT
// export".
func Name(format string) string {
	switch format {
	case "chatgpt":
		return "a ChatGPT export"
	case "openwebui":
		return "an Open WebUI export"
	case "librechat":
		return "a LibreChat export"
	case "pgconvo":
		return "a pgconvo export"
	}
	return "an export of unknown format " + format
}

// Verb is the migrate verb that reads format.
func Verb(format string) string {
	if format == "pgconvo" {
		return "restore"
	}
	return "import-" + format
}

// FileError is an export file refused whole before any of it was
// imported: an empty file, or one in another format than the verb reads.
type FileError struct {
	Path   string // the file, as given (or the member of a directory or zip)
	Format string // the format the verb reads
	Found  string // the format the file is in; "" for an empty file
}

func (e *FileError) Error() string {
	if e.Found == "" {
		return fmt.Sprintf("%s is empty (0 bytes, or only whitespace): give the export file", e.Path)
	}
	return fmt.Sprintf("%s is %s, not %s: `%s` reads it", e.Path, Name(e.Found), Name(e.Format), Verb(e.Found))
}
