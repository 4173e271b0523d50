// Drives Debian's chromium (never a downloaded browser build) with playwright-core for
// tests/test_dashboard_browser.py. Usage: node drive.mjs '<json>' with
// {chromium, senderUrl, dashboardUrl, readToken, expected: {collection: n}, screenshot, alpha,
//  live: {collection, body, token, nAfter}}.
// 1. loads the sender page (clients/js randomizes and POSTs the reports) and waits for it;
// 2. loads the collector's dashboard, enters the read token in its token field, waits until
//    every collection shows its expected n, and reads the table and estimates off the DOM;
// 3. saves a full-page screenshot, POSTs one more batch (args.live) and waits for the page
//    to show it without a reload, then reloads the dashboard with ?alpha= (intervals at
//    another level) and reads the estimates again. Prints one JSON object on stdout.
import { chromium } from 'playwright-core';

const args = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: args.chromium,
  // root in CI containers: chromium's sandbox needs user namespaces it may not have
  args: ['--no-sandbox', '--disable-gpu'],
});
const out = { consoleErrors: [], foreignRequests: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const dashboardOrigin = new URL(args.dashboardUrl).origin;
  const senderOrigin = new URL(args.senderUrl).origin;
  // offline check: any request to another origin is recorded and refused
  await context.route('**/*', (route) => {
    const origin = new URL(route.request().url()).origin;
    if (origin !== dashboardOrigin && origin !== senderOrigin) {
      out.foreignRequests.push(route.request().url());
      return route.abort();
    }
    return route.continue();
  });

  const sender = await context.newPage();
  sender.on('pageerror', (e) => out.consoleErrors.push(`sender: ${e.message}`));
  await sender.goto(args.senderUrl);
  await sender.waitForSelector('body[data-done], body[data-error]', { timeout: 60_000 });
  const error = await sender.getAttribute('body', 'data-error');
  if (error) throw new Error(`sender page: ${error}\n${await sender.textContent('#log')}`);
  out.sent = JSON.parse(await sender.getAttribute('body', 'data-done'));

  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(`dashboard: ${m.text()}`);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`dashboard: ${e.message}`));
  await page.goto(args.dashboardUrl);
  if (args.readToken) {
    // auth is on: the dashboard asks for a token (401), keeps it in sessionStorage
    await page.waitForSelector('#auth:not([hidden])', { timeout: 20_000 });
    out.authPrompt = await page.textContent('#auth-message');
    out.consoleErrors.length = 0; // the 401 that made it ask is expected
    await page.fill('#token', args.readToken);
    await page.click('#auth button[type=submit]');
  }
  for (const [name, n] of Object.entries(args.expected)) {
    await page.waitForSelector(`section.card[data-collection="${name}"][data-rendered="${n}"]`, { timeout: 30_000 });
  }
  out.stored = await page.evaluate(() => sessionStorage.getItem('ldpkit.collector.token') !== null);
  out.table = await page.$$eval('#collections tbody tr', (rows) =>
    rows.map((r) => ({ collection: r.dataset.collection, n: Number(r.dataset.n), batches: Number(r.dataset.batches) })),
  );
  const readEstimates = () => page.$$eval('table.estimate', (tables) =>
    Object.fromEntries(
      tables.map((t) => [
        t.dataset.collection,
        {
          kind: t.dataset.kind,
          n: Number(t.dataset.n),
          alpha: Number(t.dataset.alpha),
          rows: [...t.querySelectorAll('tbody tr')].map((r) => ({
            index: Number(r.dataset.index),
            label: r.dataset.label,
            estimate: Number(r.dataset.estimate),
            stdError: Number(r.dataset.stdError),
            ciLow: Number(r.dataset.ciLow),
            ciHigh: Number(r.dataset.ciHigh),
            stat: r.dataset.stat,
            value: Number(r.dataset.value),
          })),
        },
      ]),
    ),
  );
  out.estimates = await readEstimates();
  out.charts = await page.$$eval('section.card', (cards) =>
    Object.fromEntries(cards.map((c) => [c.dataset.collection, {
      bars: c.querySelectorAll('.estimate-chart rect.bar').length,
      errorBars: c.querySelectorAll('.estimate-chart line.err').length,
      seriesPoints: c.querySelectorAll('.series-chart circle.pt').length,
      seriesCountTicks: [...c.querySelectorAll('.series-chart text.ntick')].map((t) => t.textContent),
      seriesTimeTicks: c.querySelectorAll('.series-chart text.xtick').length,
      seriesAxisTitles: [...c.querySelectorAll('.series-chart text.axis-title')].map((t) => t.textContent),
      areas: c.querySelectorAll('.estimate-chart path.area').length,
      quantileLines: c.querySelectorAll('.estimate-chart line.quantile').length,
      intervals: c.querySelectorAll('.estimate-chart line.err.wide').length,
    }])),
  );
  await page.screenshot({ path: args.screenshot, fullPage: true });
  if (args.live) {
    // live refresh: a batch POSTed now must appear without reloading the page
    const { collection, body, token, nAfter } = args.live;
    out.liveBefore = await page.textContent(`section.card[data-collection="${collection}"] .estimate-chart`);
    await page.evaluate(async ({ collection, body, token }) => {
      const res = await fetch(`v1/reports/${collection}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
    }, { collection, body, token });
    const start = Date.now();
    await page.waitForSelector(`section.card[data-collection="${collection}"][data-rendered="${nAfter}"]`, { timeout: 30_000 });
    await page.waitForSelector(`#collections tr[data-collection="${collection}"][data-n="${nAfter}"]`, { timeout: 30_000 });
    out.liveSeconds = (Date.now() - start) / 1000;
    out.liveBars = await page.$$eval(`section.card[data-collection="${collection}"] .estimate-chart rect.bar`, (b) => b.length);
  }
  if (args.alpha) {
    // reloaded in the same tab: the token comes from sessionStorage, no prompt
    const url = new URL(args.dashboardUrl);
    url.searchParams.set('alpha', String(args.alpha));
    await page.goto(url.href);
    await page.waitForSelector('body[data-updated]', { timeout: 30_000 });
    out.authMessageAfterReload = await page.textContent('#auth-message');
    out.estimatesAtAlpha = await readEstimates();
  }
  out.docsTitle = await (async () => {
    const docs = await context.newPage();
    await docs.goto(new URL('docs', args.dashboardUrl).href);
    await docs.waitForSelector('section.card', { timeout: 20_000 });
    return docs.textContent('section.card h2');
  })();
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
