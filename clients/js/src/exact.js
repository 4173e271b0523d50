// Exact rational arithmetic shared by the randomizers.

/** The correctly rounded double of a / b for BigInts (as Python's int / int). */
export function exactRatio(a, b) {
  const neg = a < 0n !== b < 0n;
  if (a < 0n) a = -a;
  if (b < 0n) b = -b;
  if (a === 0n) return 0;
  // shift so the quotient has >= 66 bits; a sticky low bit keeps the rounding exact
  const shift = BigInt(Math.max(0, 66 + b.toString(2).length - a.toString(2).length));
  let q = (a << shift) / b;
  if ((a << shift) % b !== 0n) q |= 1n;
  const r = Number(q) / 2 ** Number(shift);
  return neg ? -r : r;
}

// Correctly rounded exp, expm1 and log1p (as src/ldpkit/_crmath.py). Math.exp and friends
// differ between engines (and from the libm Python uses) by an ulp now and then, and one
// ulp of e^eps changes the integer weights of a grid law; so the grid constants are
// computed here in 256-bit fixed point (BigInt) and rounded once to a double.
const P = 256n;
const ONE = 1n << P;

/** x (a double) as a fixed-point BigInt x 2^256, exactly. */
function toFixed(x) {
  const scaled = x * 2 ** 256; // a power-of-two scaling: exact
  if (!Number.isInteger(scaled)) throw new RangeError(`${x} is too small for the fixed-point grid math`);
  return BigInt(scaled);
}

/** atanh(u) for fixed-point |u| <= 1/3 (series u + u^3/3 + ...). */
function atanhFixed(u) {
  const u2 = (u * u) >> P;
  let sum = 0n;
  let pow = u;
  for (let k = 1n; pow !== 0n; k += 2n) {
    sum += pow / k;
    pow = (pow * u2) >> P;
  }
  return sum;
}

const LN2 = 2n * atanhFixed(ONE / 3n); // log 2 = 2 atanh(1/3)

function floorDiv(a, b) {
  const q = a / b;
  return (a % b !== 0n) && ((a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** e^X for fixed-point X: X = n log 2 + r, |r| <= log(2)/2, Taylor series of e^r. */
function expFixed(x) {
  const n = floorDiv(x + LN2 / 2n, LN2);
  const r = x - n * LN2;
  let sum = ONE;
  let term = ONE;
  for (let k = 1n; term !== 0n; k++) {
    term = ((term * r) >> P) / k;
    sum += term;
  }
  return n >= 0n ? sum << n : sum >> -n;
}

/** e^x correctly rounded. */
export function crExp(x) {
  return exactRatio(expFixed(toFixed(x)), ONE);
}

/** e^x - 1 correctly rounded (|x| >= 1e-20; smaller x give x, as the Python side). */
export function crExpm1(x) {
  if (Math.abs(x) < 1e-20) return x;
  return exactRatio(expFixed(toFixed(x)) - ONE, ONE);
}

/** log(1 + x) correctly rounded, x >= 0. */
export function crLog1p(x) {
  if (x === 0) return 0;
  if (!(x > 0)) throw new RangeError(`crLog1p needs x >= 0, got ${x}`);
  const z = ONE + toFixed(x);
  const k = BigInt(z.toString(2).length) - (P + 1n); // z / 2^k in [1, 2)
  const m = k >= 0n ? z >> k : z << -k;
  const u = ((m - ONE) << P) / (m + ONE);
  return exactRatio(k * LN2 + 2n * atanhFixed(u), ONE);
}
