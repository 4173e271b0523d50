// Drives Debian's chromium with playwright-core for tests/test_dashboard_browser.py: loads the
// dashboard of a collector without auth and reads its multi-attribute cards back from the
// DOM (heat-map cells, bars, cell tables). Usage: node heatmap.mjs '<json>' with
// {chromium, url, collections}. Prints {cards, consoleErrors, foreignRequests} on stdout.
import { withPage } from './_page.mjs';

const args = JSON.parse(process.argv[2]);
const out = { cards: {} };
await withPage(args, out, async (page) => {
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
});
