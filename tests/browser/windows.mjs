// Drives Debian's chromium with playwright-core for tests/test_dashboard_browser.py's
// longitudinal check: loads the collector's dashboard, waits until every collection shows
// its expected n, and reads each per-day chart (GET .../windows) off the DOM. Usage:
// node windows.mjs '<json>' with {chromium, dashboardUrl, expected: {collection: n}, screenshot?}
// (a path: a picture of the first card).
// Prints {charts: {collection: {...}}, consoleErrors, foreignRequests} on stdout.
import { chromium } from 'playwright-core';

const args = JSON.parse(process.argv[2]);
const browser = await chromium.launch({ executablePath: args.chromium, args: ['--no-sandbox', '--disable-gpu'] });
const out = { charts: {}, consoleErrors: [], foreignRequests: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const origin = new URL(args.dashboardUrl).origin;
  await context.route('**/*', (route) => {
    if (new URL(route.request().url()).origin !== origin) {
      out.foreignRequests.push(route.request().url());
      return route.abort();
    }
    return route.continue();
  });
  const page = await context.newPage();
  page.on('pageerror', (e) => out.consoleErrors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(m.text());
  });
  await page.goto(args.dashboardUrl);
  for (const [name, n] of Object.entries(args.expected)) {
    const card = `section.card[data-collection="${name}"]`;
    await page.waitForSelector(`${card}[data-rendered="${n}"]`, { timeout: 30_000 });
    out.charts[name] = await page.$eval(card, (node) => {
      const chart = node.querySelector('.windows-chart');
      const svg = chart.querySelector('svg');
      return {
        titleHidden: node.querySelector('.windows-title').hidden,
        windows: Number(chart.dataset.windows ?? -1),
        lines: Number(chart.dataset.lines ?? -1),
        title: svg?.querySelector('title')?.textContent ?? null,
        hint: chart.querySelector('p.hint')?.textContent ?? '',
        xticks: Array.from(svg?.querySelectorAll('text.xtick') ?? [], (t) => t.textContent),
        series: Array.from(svg?.querySelectorAll('g.wseries') ?? [], (g) => ({
          label: g.dataset.label,
          bands: g.querySelectorAll('path.band').length,
          lines: g.querySelectorAll('path.wline').length,
          legend: g.querySelector('text.legend')?.textContent ?? null,
          points: Array.from(g.querySelectorAll('circle.wpt'), (c) => ({
            day: c.dataset.day,
            value: Number(c.dataset.value),
            low: Number(c.dataset.low),
            high: Number(c.dataset.high),
          })),
        })),
      };
    });
  }
  if (args.screenshot) await page.locator('section.card[data-collection="os"]').screenshot({ path: args.screenshot });
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
