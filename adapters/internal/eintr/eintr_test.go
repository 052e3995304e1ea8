package eintr_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
)

func TestRetryRepeatsOnlyAnInterruptedCall(t *testing.T) {
	for _, tc := range []struct {
		rule       string
		errs       []error // what the call returns, in turn
		wantCalls  int
		wantErr    error
		wantResult int
	}{
		{"a call that succeeds is made once", []error{nil}, 1, nil, 1},
		{"an interrupted call is made again until it succeeds", []error{unix.EINTR, unix.EINTR, nil}, 3, nil, 3},
		{"another failure is returned at once", []error{unix.ENOENT}, 1, unix.ENOENT, 1},
		{"a failure after an interruption is returned", []error{unix.EINTR, unix.EACCES}, 2, unix.EACCES, 2},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			calls := 0
			n, err := eintr.Retry(func() (int, error) {
				calls++
				return calls, tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || n != tc.wantResult {
				t.Fatalf("Retry = %d, %v after %d calls; want %d, %v after %d", n, err, calls, tc.wantResult, tc.wantErr, tc.wantCalls)
			}
			calls = 0
			err = eintr.RetryErr(func() error {
				calls++
				return tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("RetryErr = %v after %d calls; want %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
