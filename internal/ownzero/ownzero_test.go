package ownzero

import "testing"

// A read sent before the process's 0 was acknowledged and answered after it
// saw the weight from before the drain: it must not end the record, or the
// restore at exit leaves the process's own drain behind. A read sent after
// it that sees a weight does (the target restarted and put it back).
func TestRecordEndsOnlyByAReadSentAfterIt(t *testing.T) {
	var r Record
	s1, s2, s3 := Key{"/run/haproxy.sock", "be", "s1"}, Key{"/run/haproxy.sock", "be", "s2"}, Key{"/run/haproxy.sock", "be", "s3"}
	before := r.ReadSent()
	r.Wrote(s1, 0)
	r.Seen(s1, before)
	if !r.Ours(s1) {
		t.Fatal("a read sent before the 0 was acknowledged ended the record")
	}
	r.Seen(s1, r.ReadSent())
	if r.Ours(s1) {
		t.Fatal("a read sent after the 0 that saw a weight left the record")
	}
	r.Wrote(s2, 0)
	r.Wrote(s2, 7)
	if r.Ours(s2) {
		t.Fatal("a weight written after the 0 left the record")
	}
	r.Wrote(s3, 0)
	if r.Ours(Key{"/run/haproxy.sock", "other", "s3"}) || r.Ours(Key{"/run/other.sock", "be", "s3"}) {
		t.Fatal("the record of one backend (or socket) answered for another")
	}
}
