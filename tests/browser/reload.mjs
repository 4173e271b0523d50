// Drives Debian's chromium with playwright-core for tests/test_device_browser.py: loads the
// device page, then reloads it args.reloads times in the same browser context (localStorage
// persists), collecting each load's outcome. Usage: node reload.mjs '<json>' with
// {chromium, url, reloads}. Prints {loads: [...], consoleErrors, foreignRequests} on stdout.
import { withPage } from './_page.mjs';

const args = JSON.parse(process.argv[2]);
const out = { loads: [] };
await withPage(args, out, async (page) => {
  for (let i = 0; i <= args.reloads; i++) {
    if (i === 0) await page.goto(args.url);
    else await page.reload();
    await page.waitForSelector('body[data-done], body[data-error]', { timeout: 30_000 });
    const error = await page.getAttribute('body', 'data-error');
    if (error) throw new Error(`load ${i}: ${error}`);
    out.loads.push(JSON.parse(await page.getAttribute('body', 'data-done')));
  }
});
