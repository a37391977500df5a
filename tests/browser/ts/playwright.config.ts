// Playwright for TypeScript against a running shop with its lab on: BASE_URL=http://127.0.0.1:5000 npx playwright test
// No browser download: Debian's Chromium (CHROMIUM_PATH, else /usr/bin/chromium), as the Python tests use it.
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: '.',
  timeout: 60_000,
  reporter: [['list']],
  use: {
    baseURL: process.env.BASE_URL ?? 'http://127.0.0.1:5000',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'],
    },
  },
});
