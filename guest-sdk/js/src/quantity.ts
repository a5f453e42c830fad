/**
 * Kubernetes quantities (`500m`, `2Gi`, `1.5`, `1e3`): parsed to thousandths of the base unit,
 * compared by value, and written back in apimachinery's canonical form.
 *
 * The syntax is apimachinery's `resource.Quantity`: an optional sign, a decimal number, and a
 * binary (`Ki` .. `Ei`), decimal (`n` `u` `m` none `k` `M` `G` `T` `P` `E`) or exponent (`e3`)
 * suffix. Values are kept to the thousandth, as apimachinery's `MilliValue`: a finer value is
 * rounded away from zero (`1n` is `1m`). The same rules as the Rust SDK's `Quantity`; both check
 * themselves against `core/vectors/quantity.json`.
 * @module
 */

/** The suffix family a quantity is written in, which its canonical form keeps. */
export type QuantityFormat = "BinarySI" | "DecimalSI" | "DecimalExponent";

const DECIMAL_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const NUMBER = /^([+-]?)([0-9]*)(?:\.([0-9]*))?/;
const EXPONENT = /^[eE][+-]?[0-9]+$/;
/** The largest number of thousandths the Rust SDK (an i128) holds: beyond it, refused everywhere. */
const LIMIT = (1n << 127n) - 1n;

/** A text that is not a quantity; the message names it and why (`2Qi is not a quantity: unknown suffix Qi`). */
export class QuantityError extends Error {
  constructor(
    /** The text as given. */
    readonly text: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`${text} is not a quantity: ${reason}`);
    this.name = "QuantityError";
  }
}

/**
 * A Kubernetes quantity: a whole number of thousandths of the base unit ({@link Quantity.millis},
 * a `bigint`: `1Ei` does not fit a `number` exactly) and the format it was written in.
 *
 * @example
 * ```ts
 * Quantity.parse("1.5Gi").compare(Quantity.parse("1G")) > 0; // true
 * Quantity.parse("1.5Gi").toString(); // "1536Mi"
 * ```
 */
export class Quantity {
  constructor(
    /** The value in thousandths of the base unit (apimachinery's `MilliValue`). */
    readonly millis: bigint,
    /** The suffix family it is written in. */
    readonly format: QuantityFormat = "DecimalSI",
  ) {}

  /** Parses `text`, e.g. `"500m"`, `"2Gi"`, `"1e3"`; throws a {@link QuantityError}. */
  static parse(text: string): Quantity {
    if (text === "") throw new QuantityError(text, "empty");
    const number = NUMBER.exec(text) as RegExpExecArray;
    const [matched, sign, whole = "", fraction = ""] = number;
    const suffix = text.slice(matched.length);
    if (whole === "" && fraction === "") throw new QuantityError(text, "no number");
    let format: QuantityFormat;
    let exp10: number;
    let binary = 0;
    if (suffix in DECIMAL_SUFFIXES) {
      format = "DecimalSI";
      exp10 = DECIMAL_SUFFIXES[suffix] as number;
    } else if (BINARY_SUFFIXES.includes(suffix)) {
      format = "BinarySI";
      exp10 = 0;
      binary = BINARY_SUFFIXES.indexOf(suffix);
    } else if (EXPONENT.test(suffix)) {
      format = "DecimalExponent";
      exp10 = Number(suffix.slice(1));
    } else {
      throw new QuantityError(text, `unknown suffix ${suffix}`);
    }
    if (exp10 > 400) throw new QuantityError(text, "too large");
    const digits = (BigInt(`${whole}${fraction}` || "0") * 1024n ** BigInt(binary)).toString().replace(/^0+/, "");
    const exponent = exp10 + 3 - fraction.length;
    let millis: bigint;
    if (digits === "") millis = 0n;
    else if (exponent >= 0) millis = BigInt(digits) * 10n ** BigInt(exponent);
    else {
      const kept = Math.max(digits.length + exponent, 0);
      millis = BigInt(digits.slice(0, kept) || "0") + (/[1-9]/.test(digits.slice(kept)) ? 1n : 0n);
    }
    if (millis > LIMIT) throw new QuantityError(text, "too large");
    return new Quantity(sign === "-" ? -millis : millis, format);
  }

  /** The value in base units, rounded away from zero (apimachinery's `Value`). */
  value(): bigint {
    const magnitude = this.millis < 0n ? -this.millis : this.millis;
    const whole = magnitude / 1000n + (magnitude % 1000n === 0n ? 0n : 1n);
    return this.millis < 0n ? -whole : whole;
  }

  /** The value in base units as a `number` (close, not exact, for large values). */
  toNumber(): number {
    return Number(this.millis) / 1000;
  }

  /** Negative, zero or positive as this quantity is less than, equal to or greater than `other`. */
  compare(other: Quantity): number {
    return this.millis < other.millis ? -1 : this.millis > other.millis ? 1 : 0;
  }

  /** Whether both have the same value (`1Ki` equals `1024`). */
  equals(other: Quantity): boolean {
    return this.millis === other.millis;
  }

  /**
   * The canonical form, as apimachinery writes it: the format it was written in, the largest
   * suffix that keeps the number whole; a binary quantity below 1024 or with a fraction is
   * written in decimal.
   */
  toString(): string {
    const m = this.millis;
    const magnitude = m < 0n ? -m : m;
    if (this.format === "BinarySI" && magnitude >= 1_024_000n && m % 1000n === 0n) {
      let number = m / 1000n;
      let power = 0;
      while (number % 1024n === 0n && power < BINARY_SUFFIXES.length - 1) {
        number /= 1024n;
        power += 1;
      }
      return `${number}${BINARY_SUFFIXES[power]}`;
    }
    if (m === 0n) return "0";
    let mantissa = m;
    let exponent = -3;
    while (mantissa % 10n === 0n) {
      mantissa /= 10n;
      exponent += 1;
    }
    const aligned = Math.floor(exponent / 3) * 3;
    mantissa *= 10n ** BigInt(exponent - aligned);
    exponent = aligned;
    if (this.format === "DecimalExponent") return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
    if (exponent > 18) {
      mantissa *= 10n ** BigInt(exponent - 18);
      exponent = 18;
    }
    const suffix = Object.keys(DECIMAL_SUFFIXES).find((s) => DECIMAL_SUFFIXES[s] === exponent) ?? "";
    return `${mantissa}${suffix}`;
  }

  /** The canonical form, so a quantity serializes as Kubernetes writes it. */
  toJSON(): string {
    return this.toString();
  }
}
