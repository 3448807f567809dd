package haproxy

import "testing"

// A read sent before the daemon's 0 was acknowledged and answered after it
// saw the weight from before the drain: it must not end the record, or the
// restore at exit leaves the daemon's own drain behind. A read sent after it
// that sees a weight does (HAProxy restarted and put the server back).
func TestZeroRecordEndsOnlyByAReadSentAfterIt(t *testing.T) {
	var z zeroes
	before := z.readSent()
	z.wrote("sock", "be", "s1", 0)
	z.seen("sock", "be", "s1", before)
	if !z.daemons("sock", "be", "s1") {
		t.Fatal("a read sent before the 0 was acknowledged ended the record")
	}
	after := z.readSent()
	z.seen("sock", "be", "s1", after)
	if z.daemons("sock", "be", "s1") {
		t.Fatal("a read sent after the 0 that saw a weight left the record")
	}
	z.wrote("sock", "be", "s2", 0)
	z.wrote("sock", "be", "s2", 7)
	if z.daemons("sock", "be", "s2") {
		t.Fatal("a weight written after the 0 left the record")
	}
	z.wrote("sock", "be", "s3", 0)
	if z.daemons("other", "be", "s3") || z.daemons("sock", "other", "s3") {
		t.Fatal("the record of one socket and backend answered for another")
	}
}
