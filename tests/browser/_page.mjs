// The set-up the one-page chromium drivers share (heatmap, rangeform, reload, windows):
// launches Debian's chromium through playwright-core (root in CI containers: no sandbox),
// refuses and records every request to another origin than the page's (the offline check;
// options.url, args.url by default), records page and console errors, runs body(page) in a
// context of options.viewport, closes the browser and prints `out` (with its consoleErrors
// and foreignRequests) as one JSON object on stdout.
import { chromium } from 'playwright-core';

export async function withPage(args, out, body, { url = args.url, viewport } = {}) {
  out.consoleErrors = [];
  out.foreignRequests = [];
  const browser = await chromium.launch({
    executablePath: args.chromium,
    args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    const context = await browser.newContext(viewport ? { viewport } : {});
    const origin = new URL(url).origin;
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
    await body(page);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
}
