// The double-click tests against any running shop: BASE_URL=http://127.0.0.1:5000 npx playwright test
// Chromium from CHROMIUM_PATH, else Playwright's own (npx playwright install chromium).
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: '.',
  timeout: 60_000,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: process.env.BASE_URL ?? 'http://127.0.0.1:5000',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || undefined,
      args: ['--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-gpu'],
    },
  },
});
