package toolcall

import (
	"context"

	"github.com/acpd/acpd/acp"
)

// Aside is a question to the editor that is about no tool call of the
// model (a rewind's conflicting files): shown as a card of its own, asked
// with one allow and one reject option, and the card closed with the
// answer's note. It goes through the same asking and reading as a call's
// question.
type Aside struct {
	// Card is the card shown: its id, title, kind, content and locations
	// (its status is pending until answered).
	Card acp.ToolCall
	// Allow and Reject are the options offered.
	Allow, Reject acp.PermissionOption
	// Meta marks the request (acp.MetaPermission).
	Meta acp.Meta
	// Allowed and Kept are the notes the card ends with.
	Allowed, Kept string
}

// Asker is what an aside needs of the session: to show and to ask.
type Asker interface {
	Update(ctx context.Context, u acp.SessionUpdate)
	RequestPermission(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
}

// AskAside shows the aside's card, asks, and closes the card: true when the
// allow option was chosen; the error when the request failed because ctx
// ended.
func AskAside(ctx context.Context, h Asker, a Aside) (bool, error) {
	card := a.Card
	card.Status = acp.StatusPending
	h.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &card})
	title := card.Title
	opts := []acp.PermissionOption{a.Allow, a.Reject}
	resp, err := h.RequestPermission(ctx, &acp.RequestPermissionRequest{
		ToolCall: acp.ToolCallUpdate{
			ToolCallID: card.ToolCallID, Title: &title, Kind: card.Kind, Status: acp.StatusPending, Content: card.Content, Locations: card.Locations,
		},
		Options: opts,
		Meta:    a.Meta,
	})
	ok := read(ctx, "", opts, resp, err, &Question{}).Kind == Allowed
	status, note := acp.StatusCompleted, a.Allowed
	if !ok {
		status, note = acp.StatusFailed, a.Kept
	}
	h.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
		ToolCallID: card.ToolCallID, Status: status, Content: append(card.Content, acp.TextContent(note)),
	}})
	if err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	return ok, nil
}
