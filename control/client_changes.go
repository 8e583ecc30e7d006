package control

import "context"

// Changes calls fs.changes.
func (c *Client) Changes(ctx context.Context, p ChangesParams) (*ChangesResult, error) {
	return callTyped[ChangesResult](ctx, c, MethodChanges, p)
}
