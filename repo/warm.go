package repo

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// warmTimeout bounds the warm-up of one new connection.
const warmTimeout = 2 * time.Second

// WarmConn runs, once on a new connection, the statements every partition
// runs on its way to MIRRORING, with keys that match no row: nothing is
// read or written, but the statements are prepared in pgx's cache and the
// server backend has loaded the catalog entries of their tables and
// indexes. A new mirror's first partitions otherwise pay those first-use
// costs on each of the pool's fresh connections at once, which would
// delay the first topic's MIRRORING after topics:add.
//
// It is best effort and never fails the connection: a database not yet
// migrated, or a slow one, leaves the connection cold, not broken. Each
// statement stands alone, so one that fails leaves no transaction open.
func WarmConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	const none = "" // no mirror, topic or owner is named ""
	_, _ = PartitionsGet(ctx, conn, none, none, -1)
	_, _ = MirrorsGet(ctx, conn, none)
	_, _ = PartitionsTransition(ctx, conn, PartitionsSetStateParams{Mirror: none, Topic: none, Partition: -1,
		Owner: none, From: "", To: "PREPARING"}, Event{Kind: "partition.state"}, none, 0)
	_, _ = OffsetRunByDestination(ctx, conn, none, none, -1, 0)
	_, _ = CheckpointsSave(ctx, conn, none, []Checkpoint{{Mirror: none, Topic: none, Partition: -1}})
	_, _ = PartitionsSetEnds(ctx, conn, none, []EndOffsets{{ID: PartitionID{Mirror: none, Topic: none, Partition: -1}}})
}
