package policy

import (
	"context"
	"testing"
)

func TestDefaultsApprove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		in   ApprovalInput
		want string
	}{
		{ApprovalInput{Tool: "read_file"}, Allow},
		{ApprovalInput{Tool: "terminal", Patterns: []string{"recursive delete"}}, Ask},
		{ApprovalInput{Tool: "terminal", Patterns: []string{"recursive delete"}, Approved: []string{"recursive delete"}}, Allow},
		{ApprovalInput{Tool: "terminal", Patterns: []string{"recursive delete", "git force push"}, Approved: []string{"recursive delete"}}, Ask},
	}
	for _, c := range cases {
		if d, err := (Defaults{}).Approve(ctx, c.in); err != nil || d.Decision != c.want {
			t.Errorf("%+v: %+v %v", c.in, d, err)
		}
	}
}

func TestBusyModes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": Interrupt, "bogus": Interrupt, "queue": Queue, "steer": Steer, "reject": Reject} {
		if got := NormalizeBusyMode(in); got != want {
			t.Errorf("%q → %q want %q", in, got, want)
		}
	}
	b := NewBusySetting("steer")
	if d, _ := b.BusyInput(context.Background(), BusyInput{}); d.Mode != Steer {
		t.Fatal(d)
	}
	if err := b.Set("nonsense"); err == nil || b.Mode() != Steer {
		t.Fatal("an unknown mode must be refused and change nothing")
	}
	if err := b.Set(Queue); err != nil || b.Mode() != Queue {
		t.Fatal(err)
	}
	if d, _ := (Defaults{}).Steer(context.Background(), SteerInput{Text: "x"}); d.Action != Deliver || d.Text != "x" {
		t.Fatal(d)
	}
	if d, _ := (Defaults{}).Route(context.Background(), RouteInput{SessionID: "s", Model: "m"}); d.SessionID != "s" || d.Model != "m" {
		t.Fatal(d)
	}
}
