/**
 * Test helper: a headless Chromium driven through puppeteer-core, for tests that look at a page
 * the way a person does. Uses the browser the machine has (Debian's `chromium`, or
 * $CHROME_PATH); never downloads one. `findChromium()` says why there is none, so a test can skip
 * with that reason.
 */
import { accessSync, constants } from 'node:fs';
import type { Browser } from 'puppeteer-core';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/chromium-headless-shell', '/usr/bin/google-chrome'];

export function findChromium(): { path: string } | { missing: string } {
  const fromEnv = process.env['CHROME_PATH'];
  const candidates = fromEnv === undefined || fromEnv === '' ? CANDIDATES : [fromEnv];
  for (const p of candidates) {
    try {
      accessSync(p, constants.X_OK);
      return { path: p };
    } catch {
      // try the next one
    }
  }
  return { missing: `no Chromium found (looked for ${candidates.join(', ')}; install Debian's chromium or set CHROME_PATH)` };
}

export async function launchChromium(executablePath: string): Promise<Browser> {
  const { launch } = await import('puppeteer-core');
  return launch({
    executablePath,
    headless: true,
    // Root in CI has no user namespace sandbox; the page is our own file.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  });
}
