// Drives Debian's chromium with playwright-core for tests/test_dashboard_browser.py's
// longitudinal check: loads the collector's dashboard, waits until every collection shows
// its expected n, and reads each per-day chart (GET .../windows) off the DOM. Usage:
// node windows.mjs '<json>' with {chromium, dashboardUrl, expected: {collection: n}, screenshot?}
// (a path: a picture of the first card).
// Prints {charts: {collection: {...}}, consoleErrors, foreignRequests} on stdout.
import { withPage } from './_page.mjs';

const args = JSON.parse(process.argv[2]);
const out = { charts: {} };
await withPage(args, out, async (page) => {
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
}, { url: args.dashboardUrl, viewport: { width: 1100, height: 900 } });
