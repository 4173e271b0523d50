// Drives Debian's chromium with playwright-core for tests/test_device_browser.py: loads the
// device page, then reloads it args.reloads times in the same browser context (localStorage
// persists), collecting each load's outcome. Usage: node reload.mjs '<json>' with
// {chromium, url, reloads}. Prints {loads: [...], consoleErrors, foreignRequests} on stdout.
import { chromium } from 'playwright-core';

const args = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: args.chromium,
  args: ['--no-sandbox', '--disable-gpu'],
});
const out = { loads: [], consoleErrors: [], foreignRequests: [] };
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
  for (let i = 0; i <= args.reloads; i++) {
    if (i === 0) await page.goto(args.url);
    else await page.reload();
    await page.waitForSelector('body[data-done], body[data-error]', { timeout: 30_000 });
    const error = await page.getAttribute('body', 'data-error');
    if (error) throw new Error(`load ${i}: ${error}`);
    out.loads.push(JSON.parse(await page.getAttribute('body', 'data-done')));
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
