import { sql, type RawBuilder } from 'kysely';

/** Past this many rows the planner's guess of 100 is near enough, and a hash join may well be right. */
const COUNTED_UP_TO = 128;

/**
 * Rows sent as one JSON parameter, as a subquery to join to a table:
 * `(SELECT * FROM json_to_recordset($json) AS <alias>(<columns>) [WHERE <where>] LIMIT <bound>)`.
 *
 * Postgres plans `json_to_recordset` as 100 rows, whatever the JSON holds. Joined on its key to a
 * table of a few thousand rows or more, that guess made it hash the 100 rows and read the whole
 * table, where the one or few rows sent want the table's primary key: at 20,000 rows, a timer
 * disarmed, a snapshot's seq moved, a job removed or a placement request withdrawn cost 3.4–5.4 ms
 * of the database's time, against 0.06–0.2 ms through the index. Every commit that disarms a
 * deadline (each ack does) paid it, and `run_snapshots` keeps a row per run ever made.
 *
 * The bound is the number of rows rounded up to a power of two, written into the statement: the
 * planner takes it as the estimate, and it never drops a row. It is a literal, not a parameter: with
 * a parameter, a prepared statement's generic plan guesses 10 rows, costs more than a plan made for
 * the bound value, and Postgres then planned the group commit anew on every execution (0.4 ms each).
 * Rounding keeps the statement texts, each prepared once per connection, to a few per shape.
 */
export function recordset(json: string, count: number, alias: string, columns: string, where?: RawBuilder<unknown>): RawBuilder<unknown> {
  const filter = where === undefined ? sql`` : sql` WHERE ${where}`;
  const limit = count > COUNTED_UP_TO ? sql`` : sql` LIMIT ${sql.lit(2 ** Math.ceil(Math.log2(Math.max(count, 1))))}`;
  return sql`(SELECT * FROM json_to_recordset(${json}::json) AS ${sql.raw(alias)}(${sql.raw(columns)})${filter}${limit})`;
}
