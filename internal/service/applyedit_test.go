package service

import (
	"testing"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyEdit_OldStringMustOccurOnce pins the merge's edit of the text
// the caller read to the backend's rule: once, or every time with
// ReplaceAll; absent or repeated is refused with the count.
func TestApplyEdit_OldStringMustOccurOnce(t *testing.T) {
	tests := []struct {
		name, text string
		req        provider.EditRequest
		want       string
		wantCode   provider.Code
		wantInMsg  string
	}{
		{name: "once", text: "a\nb\nc\n", req: provider.EditRequest{OldString: "b\n", NewString: "B\n"}, want: "a\nB\nc\n"},
		{name: "CRLF old string", text: "a\nb\n", req: provider.EditRequest{OldString: "a\r\n", NewString: "A\r\n"}, want: "A\nb\n"},
		{name: "absent", text: "a\n", req: provider.EditRequest{OldString: "z", NewString: "y"}, wantCode: provider.CodeEditNotFound},
		{name: "three times", text: "x x x\n", req: provider.EditRequest{OldString: "x", NewString: "y"}, wantCode: provider.CodeAmbiguousEdit, wantInMsg: "3 times"},
		{name: "replace all", text: "x x x\n", req: provider.EditRequest{OldString: "x", NewString: "y", ReplaceAll: true}, want: "y y y\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyEdit(provider.Target{DisplayPath: "f.txt"}, tc.text, tc.req)
			if tc.wantCode != "" {
				require.Equal(t, tc.wantCode, provider.CodeOf(err), "err: %v", err)
				assert.Contains(t, provider.MessageOf(err), tc.wantInMsg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
