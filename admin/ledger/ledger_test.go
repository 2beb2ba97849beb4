package ledger_test

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/ledger"
)

func TestSummarizeSortsSegmentsByWhereTheyAre(t *testing.T) {
	cases := []struct {
		name                               string
		stats                              utils.PersistentTopicInternalStats
		bookkeeper, offloadable, offloaded ledger.Amount
		offloadTo                          int64
	}{
		{
			name: "only the open segment",
			stats: utils.PersistentTopicInternalStats{State: "LedgerOpened", CurrentLedgerEntries: 3, CurrentLedgerSize: 300,
				Ledgers: []utils.LedgerInfo{{LedgerID: 7}}},
			bookkeeper: ledger.Amount{Segments: 1, Entries: 3, Bytes: 300},
			offloadTo:  7,
		},
		{
			name: "offloaded, closed and open segments",
			stats: utils.PersistentTopicInternalStats{State: "LedgerOpened", CurrentLedgerEntries: 1, CurrentLedgerSize: 10,
				Ledgers: []utils.LedgerInfo{
					{LedgerID: 1, Entries: 5, Size: 500, Offloaded: true},
					{LedgerID: 2, Entries: 4, Size: 400, Offloaded: true},
					{LedgerID: 3, Entries: 2, Size: 200},
					{LedgerID: 4},
				}},
			bookkeeper:  ledger.Amount{Segments: 2, Entries: 3, Bytes: 210},
			offloadable: ledger.Amount{Segments: 1, Entries: 2, Bytes: 200},
			offloaded:   ledger.Amount{Segments: 2, Entries: 9, Bytes: 900},
			offloadTo:   4,
		},
		{
			name: "open segment not yet created after a reload: the last one is closed",
			stats: utils.PersistentTopicInternalStats{State: "LedgerOpened",
				Ledgers: []utils.LedgerInfo{{LedgerID: 1, Entries: 5, Size: 500}}},
			bookkeeper:  ledger.Amount{Segments: 1, Entries: 5, Bytes: 500},
			offloadable: ledger.Amount{Segments: 1, Entries: 5, Bytes: 500},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := ledger.Summarize("persistent://t/ledger/events", tc.stats)
			if st.BookKeeper != tc.bookkeeper || st.Offloadable != tc.offloadable || st.Offloaded != tc.offloaded {
				t.Errorf("got bookkeeper %v, offloadable %v, offloaded %v; want %v, %v, %v",
					st.BookKeeper, st.Offloadable, st.Offloaded, tc.bookkeeper, tc.offloadable, tc.offloaded)
			}
			if got := ledger.OffloadTarget(st).LedgerID; got != tc.offloadTo {
				t.Errorf("offload target ledger %d, want %d", got, tc.offloadTo)
			}
		})
	}
}

func TestSettingOfNamesWhatABrokerErrorPointsAt(t *testing.T) {
	cases := []struct {
		name, reason, want string
	}{
		{"missing bucket (seen from s3proxy)", "org.jclouds.blobstore.KeyNotFoundException: x-ledger-880 not found in container foldline-no-such-bucket: The specified bucket does not exist", ledger.SettingBucket},
		{"server down (seen with s3proxy stopped)", "org.jclouds.http.HttpResponseException: Connection refused connecting to POST http://127.0.0.1:9000/foldline-offload/x-ledger-888?uploads HTTP/1.1", ledger.SettingEndpoint},
		{"server down, an object id holding 403 (seen in CI)", "org.apache.bookkeeper.mledger.ManagedLedgerException: java.util.concurrent.CompletionException: org.jclouds.http.HttpResponseException: Connection refused connecting to POST http://127.0.0.1:9000/foldline-offload/b0665567-4645-4732-868f-cc4037ac5c02-ledger-1367?uploads HTTP/1.1", ledger.SettingEndpoint},
		{"server down, a bucket named bucket", "org.jclouds.http.HttpResponseException: Connection refused connecting to PUT http://s3.example:9000/events-bucket/x-ledger-403 HTTP/1.1", ledger.SettingEndpoint},
		{"refused by status", "org.jclouds.http.HttpResponseException: command: PUT http://127.0.0.1:9000/foldline-offload/x-ledger-7 HTTP/1.1 failed with response: HTTP/1.1 403 Forbidden", ledger.SettingCredentials},
		{"wrong secret", "org.jclouds.rest.AuthorizationException: SignatureDoesNotMatch", ledger.SettingCredentials},
		{"no offloader loaded (seen before the NARs were in place)", "org.apache.bookkeeper.mledger.ManagedLedgerException: [NullLedgerOffloader] does not support offload", ledger.SettingDriver},
		{"something else", "java.lang.IllegalStateException: boom", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ledger.SettingOf(tc.reason); got != tc.want {
				t.Errorf("SettingOf(%q) = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
