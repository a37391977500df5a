// What a QA engineer writes against a running lab shop: a double-click on Pay places one order and one charge.
// The shop counts for the test: GET /api/lab/requests?key=K lists the requests it received under a key.
import { test, expect, type Page } from '@playwright/test';

const SLOW_CARD = '4000 0000 0000 0077'; // the gateway takes a few seconds: the second click lands mid-payment

async function checkout(page: Page): Promise<string> {
  await page.goto('/');
  await page.getByRole('button', { name: 'Add to cart' }).first().click();
  await page.goto('/checkout');
  await page.getByLabel('Email').fill('qa@example.com');
  await page.getByLabel('Card number').fill(SLOW_CARD);
  return page.getByTestId('idempotency-key').innerText(); // the key this form will pay under
}

// Pressed by position: a locator's click would wait for the navigation the first press started.
async function centreOfPay(page: Page): Promise<[number, number]> {
  const box = (await page.getByTestId('pay-button').boundingBox())!;
  return [box.x + box.width / 2, box.y + box.height / 2];
}

async function received(page: Page, key: string): Promise<{ status: number | null }[]> {
  const answer = await page.request.get(`/api/lab/requests?key=${encodeURIComponent(key)}`);
  expect(answer.ok()).toBeTruthy();
  return answer.json();
}

test('with the Pay button guard on, a second press sends nothing', async ({ page }) => {
  const key = await checkout(page);
  const [x, y] = await centreOfPay(page);
  await page.mouse.click(x, y);
  // A dblclick() would prove nothing: Chromium cancels the first submit when a second one follows at once, so one
  // payment leaves either way. Press again once the shop has the first (the slow card holds it there).
  await expect.poll(async () => (await received(page, key)).length).toBeGreaterThanOrEqual(1);
  await page.mouse.click(x, y); // on the disabled button
  await expect(page.getByTestId('order-status')).toHaveText('paid', { timeout: 20_000 });
  expect(await received(page, key)).toHaveLength(1); // the guard: the second press sent nothing
});

test('with the guard off, both presses arrive, and the shop still places one order', async ({ page }) => {
  await page.goto('/lab');
  await page.getByTestId('guard-off').click(); // this browser's session only
  const key = await checkout(page);
  const [x, y] = await centreOfPay(page);
  await page.mouse.click(x, y);
  // The second press while the first is at the slow gateway: once the shop says it received the first.
  await expect.poll(async () => (await received(page, key)).length).toBeGreaterThanOrEqual(1);
  await page.mouse.click(x, y);
  await expect(page.getByTestId('order-status')).toHaveText('paid', { timeout: 20_000 });
  expect(await received(page, key)).toHaveLength(2); // both presses reached the shop ...
  const ledger = await (await page.request.get('/api/lab/ledger')).json();
  const orders = ledger.orders.filter((order: { idempotency_key: string }) => order.idempotency_key === key);
  expect(orders).toHaveLength(1); // ... and it placed one order under the key, charged once
  const charges = ledger.charges.filter(
    (charge: { order_id: string; status: string }) => charge.order_id === orders[0].id && charge.status === 'succeeded');
  expect(charges).toHaveLength(1);
});
