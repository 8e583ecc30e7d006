package control

import "context"

// BranchCreate calls branch.create.
func (c *Client) BranchCreate(ctx context.Context, p BranchCreateParams) (*BranchInfo, error) {
	return callTyped[BranchInfo](ctx, c, MethodBranchCreate, p)
}

// BranchList calls branch.list.
func (c *Client) BranchList(ctx context.Context) (*BranchListResult, error) {
	return callTyped[BranchListResult](ctx, c, MethodBranchList, Empty{})
}

// BranchDiff calls branch.diff (one page).
func (c *Client) BranchDiff(ctx context.Context, p BranchDiffParams) (*BranchDiffResult, error) {
	return callTyped[BranchDiffResult](ctx, c, MethodBranchDiff, p)
}

// BranchCommit calls branch.commit. A conflict is an *RPCError with code
// FS_STALE_VERSION whose Conflicts name the paths.
func (c *Client) BranchCommit(ctx context.Context, p BranchCommitParams) (*BranchCommitResult, error) {
	return callTyped[BranchCommitResult](ctx, c, MethodBranchCommit, p)
}

// BranchRebase calls branch.rebase. A conflict is an *RPCError with code
// FS_MERGE_CONFLICT whose Conflicts name the paths and ConflictHunks the
// regions.
func (c *Client) BranchRebase(ctx context.Context, p BranchRebaseParams) (*BranchRebaseResult, error) {
	return callTyped[BranchRebaseResult](ctx, c, MethodBranchRebase, p)
}

// BranchDiscard calls branch.discard.
func (c *Client) BranchDiscard(ctx context.Context, name string) error {
	return c.Call(ctx, MethodBranchDiscard, BranchNameParams{Name: name}, nil)
}

// BranchMount calls branch.mount.
func (c *Client) BranchMount(ctx context.Context, p BranchMountParams) (*BranchMountResult, error) {
	return callTyped[BranchMountResult](ctx, c, MethodBranchMount, p)
}

// BranchUnmount calls branch.unmount.
func (c *Client) BranchUnmount(ctx context.Context, name string) error {
	return c.Call(ctx, MethodBranchUnmount, BranchNameParams{Name: name}, nil)
}
