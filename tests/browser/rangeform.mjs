// Drives Debian's chromium with playwright-core for tests/test_dashboard_browser.py: loads the
// dashboard of a collector without auth, fills the range form of each named collection (low
// and high per attribute, an empty field for an unconstrained side), submits it and reads the
// answer back from the DOM. Usage: node rangeform.mjs '<json>' with {chromium, url, queries:
// {collection: {attribute: [low, high]}}}. Prints {forms, consoleErrors, foreignRequests}.
import { withPage } from './_page.mjs';

const args = JSON.parse(process.argv[2]);
const out = { forms: {} };
await withPage(args, out, async (page) => {
  await page.goto(args.url);
  for (const [name, box] of Object.entries(args.queries)) {
    const form = `form.range-form[data-collection="${name}"]`;
    await page.waitForSelector(form, { timeout: 30_000 });
    const before = await page.$eval(form, (f) => ({
      attributes: Number(f.dataset.attributes),
      domains: Array.from(f.querySelectorAll('tbody tr'), (tr) => tr.children[1].textContent),
      answer: f.querySelector('.range-answer').textContent,
    }));
    for (const [a, [lo, hi]] of Object.entries(box)) {
      if (lo !== null) await page.fill(`${form} input[name="low-${a}"]`, String(lo));
      if (hi !== null) await page.fill(`${form} input[name="high-${a}"]`, String(hi));
    }
    await page.click(`${form} button[type="submit"]`);
    await page.waitForSelector(`${form} .range-answer[data-estimate]`, { timeout: 30_000 });
    out.forms[name] = {
      ...before,
      ...(await page.$eval(`${form} .range-answer`, (o) => ({
        range: o.dataset.range,
        estimate: Number(o.dataset.estimate),
        stdError: Number(o.dataset.stdError),
        ciLow: Number(o.dataset.ciLow),
        ciHigh: Number(o.dataset.ciHigh),
        n: Number(o.dataset.n),
        text: o.textContent,
      }))),
    };
  }
  // the answers stay (and are asked again) when the page polls
  await page.waitForFunction(() => Number(document.body.dataset.updated) > 0);
  const first = Object.keys(args.queries)[0];
  const stamp = await page.evaluate(() => document.body.dataset.updated);
  await page.waitForFunction((s) => document.body.dataset.updated !== s, stamp, { timeout: 30_000 });
  out.afterRefresh = await page.$eval(
    `form.range-form[data-collection="${first}"] .range-answer`,
    (o) => Number(o.dataset.estimate),
  );
});
