package fanout

import (
	"encoding/json"

	"github.com/google/uuid"
)

// parsePostID reads the id of the post a post_delete names: the string
// field post_id of the event's data object, a version 1 UUID. On failure
// it returns a skip reason.
func parsePostID(data []byte) (uuid.UUID, string) {
	var d struct {
		PostID *string `json:"post_id"`
	}
	if len(data) == 0 {
		return uuid.UUID{}, SkipMissingPostID
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return uuid.UUID{}, SkipInvalidPostID
	}
	if d.PostID == nil || *d.PostID == "" {
		return uuid.UUID{}, SkipMissingPostID
	}
	id, err := uuid.Parse(*d.PostID)
	if err != nil || id.Version() != 1 || id.Variant() != uuid.RFC4122 {
		return uuid.UUID{}, SkipInvalidPostID
	}
	return id, ""
}
