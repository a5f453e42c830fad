/**
 * Durations in Go's `time.ParseDuration` syntax (`1h30m`, `500ms`, `1.5s`), the way Kubernetes
 * objects write them, and back in Go's `Duration.String` form (`1h30m0s`).
 *
 * A duration is a sequence of decimal numbers, each with an optional fraction and a unit: `ns`,
 * `us` (or `µs`), `ms`, `s`, `m`, `h`; `0` alone needs no unit. Durations here are delays and
 * intervals: a negative one is refused, and, as in Go, one beyond `2**63 - 1` nanoseconds is too
 * large. The same rules as the Rust SDK's `duration`; both check themselves against
 * `core/vectors/duration.json`.
 * @module
 */

const UNITS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "µs": 1_000n,
  "μs": 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const MAX_NANOS = (1n << 63n) - 1n;
const NUMBER = /^([0-9]*)(?:\.([0-9]*))?/;
const UNIT = /^[^0-9.]*/;

/** A text that is not a duration; the message names it and why (`5x is not a duration: unknown unit x`). */
export class DurationError extends Error {
  constructor(
    /** The text as given. */
    readonly text: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`${text} is not a duration: ${reason}`);
    this.name = "DurationError";
  }
}

/** `text` in nanoseconds, exactly; throws a {@link DurationError}. */
export function parseNanos(text: string): bigint {
  const negative = text.startsWith("-");
  let rest = text.startsWith("-") || text.startsWith("+") ? text.slice(1) : text;
  if (rest === "0") return 0n;
  if (rest === "") throw new DurationError(text, "empty");
  let total = 0n;
  while (rest !== "") {
    const [matched, whole = "", fullFraction = ""] = NUMBER.exec(rest) as RegExpExecArray;
    if (whole === "" && fullFraction === "") throw new DurationError(text, `expected a number at ${rest}`);
    const unit = (UNIT.exec(rest.slice(matched.length)) as RegExpExecArray)[0];
    if (unit === "") throw new DurationError(text, "missing unit");
    const scale = UNITS[unit];
    if (scale === undefined) throw new DurationError(text, `unknown unit ${unit}`);
    const fraction = fullFraction.slice(0, 13);
    total += BigInt(whole || "0") * scale + (fraction ? (BigInt(fraction) * scale) / 10n ** BigInt(fraction.length) : 0n);
    if (total > MAX_NANOS) throw new DurationError(text, "too large");
    rest = rest.slice(matched.length + unit.length);
  }
  if (negative && total > 0n) throw new DurationError(text, "negative");
  return total;
}

/** `text` in milliseconds (the unit of the SDK's delays), truncated; throws a {@link DurationError}. */
export function parseDuration(text: string): number {
  return Number(parseNanos(text) / 1_000_000n);
}

/** `nanos` nanoseconds as Go's `Duration.String` writes them: `1h30m0s`, `1.5s`, `500ms`. */
export function formatNanos(nanos: bigint): string {
  if (nanos === 0n) return "0s";
  if (nanos < 1_000_000_000n) {
    const [scale, unit] = nanos < 1_000n ? [1n, "ns"] : nanos < 1_000_000n ? [1_000n, "µs"] : [1_000_000n, "ms"];
    return `${decimal(nanos, scale as bigint)}${unit}`;
  }
  const hours = nanos / 3_600_000_000_000n;
  const minutes = (nanos % 3_600_000_000_000n) / 60_000_000_000n;
  const seconds = decimal(nanos % 60_000_000_000n, 1_000_000_000n);
  if (hours > 0n) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0n) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}

/** `ms` milliseconds as Go's `Duration.String` writes them. */
export function formatDuration(ms: number): string {
  return formatNanos(BigInt(Math.round(ms * 1_000_000)));
}

function decimal(value: bigint, scale: bigint): string {
  const whole = value / scale;
  const fraction = value % scale;
  if (fraction === 0n) return `${whole}`;
  return `${whole}.${fraction.toString().padStart(scale.toString().length - 1, "0")}`.replace(/0+$/, "");
}
