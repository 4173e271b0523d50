// Drives Debian's chromium with playwright-core for tests/test_dashboard_browser.py: loads the
// dashboard of a collector without auth and reads its multi-attribute cards back from the
// DOM (heat-map cells, bars, cell tables). Usage: node heatmap.mjs '<json>' with
// {chromium, url, collections}. Prints {cards, consoleErrors, foreignRequests} on stdout.
import { chromium } from 'playwright-core';

const args = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: args.chromium,
  args: ['--no-sandbox', '--disable-gpu'],
});
const out = { cards: {}, consoleErrors: [], foreignRequests: [] };
try {
  const context = await browser.newContext();
  const origin = new URL(args.url).origin;
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
  await page.goto(args.url);
  for (const name of args.collections) {
    await page.waitForSelector(`section[data-collection="${name}"][data-rendered]`, { timeout: 30_000 });
  }
  out.cards = await page.evaluate((names) => {
    const cards = {};
    for (const name of names) {
      const card = document.querySelector(`section[data-collection="${name}"]`);
      const svg = card.querySelector('.estimate-chart svg');
      cards[name] = {
        summary: card.querySelector('.summary').textContent,
        marginal: svg ? svg.dataset.marginal ?? null : null,
        chartTitle: svg ? svg.querySelector('title').textContent : null,
        heat: Array.from(card.querySelectorAll('rect.heat'), (r) => ({
          row: Number(r.dataset.row),
          col: Number(r.dataset.col),
          estimate: Number(r.dataset.estimate),
          title: r.querySelector('title').textContent,
        })),
        bars: card.querySelectorAll('rect.bar').length,
        hint: card.querySelector('.estimate-chart .hint')?.textContent ?? null,
        rows: Array.from(card.querySelectorAll('table.estimate tbody tr'), (tr) => ({
          cell: tr.dataset.cell,
          estimate: Number(tr.dataset.estimate),
          low: Number(tr.dataset.ciLow),
          high: Number(tr.dataset.ciHigh),
        })),
      };
    }
    return cards;
  }, args.collections);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
