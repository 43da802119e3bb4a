// Package homestore lets any number of hermes processes share one home. The home's badger
// directory is owned by one small store process (Serve; `hermes store-server`), started on
// demand by the first process that needs it (Spawn) and exiting after it has had no clients for
// a while. A lock file in the home keeps it to one process; the others reach it over a unix
// socket in the home (mode 0600, each peer's uid checked) through Client, a store.Store that
// carries every call of its process over one connection.
//
// The store process is the single writer of the directory, so everything the store contract
// promises in one process holds across processes: compare-and-set updates, lease generations
// checked in the write's own transaction, and change hints (Watch) pushed to every client. A
// client whose store process dies reconnects, starting a new one, within about a second: reads in
// flight are retried, writes in flight fail with store.ErrUnavailable (the process answers a write
// only after badger committed it, so an acknowledged write is never lost), and watches report
// Lost so their watchers catch up by cursor.
package homestore
