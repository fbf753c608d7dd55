import { sql, type RawBuilder } from 'kysely';

/**
 * Rows sent as one JSON parameter (`rows`: each row's JSON text), as a subquery to join to a table:
 * `(SELECT * FROM (SELECT * FROM json_to_recordset($json) AS <alias>(<columns>) [WHERE <where>] LIMIT $count) AS counted LIMIT $count)`.
 *
 * Postgres plans `json_to_recordset` as 100 rows, whatever the JSON holds. Joined on its key to a
 * table of a few thousand rows or more, that guess made it hash the 100 rows and read the whole
 * table, where the one or few rows sent want the table's primary key: at 20,000 rows, a timer
 * disarmed, a snapshot's seq moved, a job removed or a placement request withdrawn cost 3.4–5.4 ms
 * of the database's time, against 0.06–0.2 ms through the index. Every commit that disarms a
 * deadline (each ack does) paid it, and `run_snapshots` keeps a row per run ever made.
 *
 * The LIMIT, the number of rows sent, never drops one; it is how the planner learns the count. It is
 * there twice for prepared statements (the group commit is one): Postgres plans one for its values
 * five times, then keeps a plan made without them if that plan costs no more. Made without the
 * value, a `LIMIT $n` keeps a tenth of its input: 10 rows once, and 1 twice. With a single LIMIT, a
 * plan for 1 row always looked cheaper than the one for 10, so Postgres planned the group commit anew
 * on every execution (0.4 ms each); with two, the plan kept is the one for a single row, and every
 * count is joined through the index. The statement's text is the same whatever the count.
 *
 * Only where the table is reached through the join alone: given a condition of its own that stale
 * statistics call selective, the planner may put the table outside and read the rows counted as one
 * again for each of its rows. The fence's run ids stay `= ANY` for that reason (docs/database.md).
 */
export function recordset(rows: readonly string[], alias: string, columns: string, where?: RawBuilder<unknown>): RawBuilder<unknown> {
  // The count and the JSON come from the same list: a LIMIT below it would drop rows unseen.
  const counted = sql`SELECT * FROM ${jsonRows(rows, alias, columns, where)} LIMIT ${rows.length}::int8`;
  return sql`(SELECT * FROM (${counted}) AS counted LIMIT ${rows.length}::int8)`;
}

/**
 * The rows as they are, not counted: `json_to_recordset($json) AS <alias>(<columns>) [WHERE <where>]`,
 * a FROM item with its condition, for rows inserted rather than joined to a table's key.
 */
export function jsonRows(rows: readonly string[], alias: string, columns: string, where?: RawBuilder<unknown>): RawBuilder<unknown> {
  const filter = where === undefined ? sql`` : sql` WHERE ${where}`;
  return sql`json_to_recordset(${`[${rows.join(',')}]`}::json) AS ${sql.raw(alias)}(${sql.raw(columns)})${filter}`;
}
