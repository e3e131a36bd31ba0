// What the console's browser test files share: their settings from the
// environment, the viewports, axe-core's source, Chromium's launch, and
// fulfill (see below).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

// env reads a variable the Go test that runs the file sets.
export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set: run this file through its Go test (cmd/kmirror/console_*browser_test.go)`);
  return v;
};
export const base = env('KMIRROR_URL');
export const shots = process.env.KMIRROR_SCREENSHOTS || '';
export const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };
export const LONG = { timeout: 30_000 };

// launch starts Debian's Chromium, headless, with nothing fetched from the
// network.
export const launch = () => chromium.launch({
  executablePath: process.env.KMIRROR_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-background-networking', '--disable-gpu',
    '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
});

// unrouteAll removes the page's routes and waits for the handlers still
// running, but not forever: Playwright's wait can hang for good after a
// reload cancelled a request under a handler (microsoft/playwright#38674),
// which killed the whole file at its 5-minute limit about one run in five
// on a busy machine. The routes are gone either way; a late handler's
// answer is caught by fulfill.
export const unrouteAll = async (page, ms = 10_000) => {
  let timer;
  const gaveUp = new Promise((resolve) => { timer = setTimeout(() => resolve(true), ms); });
  const late = await Promise.race([page.unrouteAll({ behavior: 'wait' }).then(() => false), gaveUp]);
  clearTimeout(timer);
  if (late) console.warn(`unrouteAll: a route handler still ran after ${ms} ms; going on`);
};

// fulfill answers a routed request, unless the page gave up on it first: a
// reload cancels a request whose handler is still running, and its
// route.fulfill then fails ("Route is already handled") after the test has
// ended, failing the whole file. Routes are removed with unrouteAll
// (above, behavior 'wait') for the same reason: a plain unroute lets
// Playwright continue a request under a running handler.
export const fulfill = (route, answer) => route.fulfill(answer).catch((err) => {
  if (!/already handled/.test(err.message)) throw err;
});
