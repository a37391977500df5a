// Double clicks, two tabs, Back, a slow card and a lost answer, against any running shop: each ends on one order,
// charged once. The same tests as ../test_double_click.py, in Playwright for TypeScript (../README.md says why each
// presses by position, once the shop has the first press, and never trusts dblclick()).
import { test, expect, type Page, type Request } from '@playwright/test';

const SLOW_CARD = '4000 0000 0000 0077'; // the gateway takes seconds: a second press lands while the first is paying
const GOOD_CARD = '4242 4242 4242 4242';
const PROXY_GAVE_UP = /50[24] (Gateway Time-?out|Bad Gateway)/i; // a proxy's own page (nginx), not the shop's

type Received = { status: number | null; replayed: boolean };

// --- what the shop says: its pages, and its lab's JSON where the lab is on ---------------------------------------

let labOn: boolean | undefined;

async function lab(page: Page): Promise<boolean> {
  if (labOn === undefined) {
    const answer = await page.request.get('/api/lab/ledger');
    labOn = answer.ok() && (answer.headers()['content-type'] ?? '').startsWith('application/json');
  }
  return labOn;
}

async function received(page: Page, key: string): Promise<Received[]> {
  const answer = await page.request.get(`/api/lab/requests?key=${encodeURIComponent(key)}`);
  expect(answer.ok()).toBeTruthy();
  return answer.json();
}

async function waitForRequests(page: Page, key: string, count: number): Promise<Received[]> {
  await expect.poll(async () => (await received(page, key)).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(count);
  return received(page, key);
}

async function chargedOnce(page: Page, key: string, orderId: string): Promise<void> {
  if (!(await lab(page))) return;
  const ledger = await (await page.request.get('/api/lab/ledger')).json();
  const orders = ledger.orders.filter((order: { idempotency_key: string }) => order.idempotency_key === key);
  expect(orders.map((order: { id: string }) => order.id)).toEqual([orderId]);
  const charges = ledger.charges.filter(
    (charge: { order_id: string; status: string }) => charge.order_id === orderId && charge.status === 'succeeded');
  expect(charges).toHaveLength(1);
}

// The order page a payment ends on, and its id; a proxy's own error page is reported as what it is (skipped).
async function onTheOrder(page: Page): Promise<string> {
  const order = page.getByTestId('order-id');
  const proxy = page.getByRole('heading', { name: PROXY_GAVE_UP });
  await expect(order.or(proxy)).toBeVisible({ timeout: 30_000 });
  test.skip(await proxy.isVisible(), 'a proxy in front of the shop gave up waiting (its read timeout is shorter ' +
    'than this payment) and answered its own page; raise proxy_read_timeout above the slow card, or test an app server');
  return order.innerText();
}

// --- what a shopper does ---------------------------------------------------------------------------------------

async function addToCart(page: Page, index = 0): Promise<void> {
  await page.goto('/?lang=en');
  const before = Number((await page.getByTestId('cart-count').innerText()) || 0);
  await page.getByRole('button', { name: 'Add to cart' }).nth(index).click();
  await expect(page.getByTestId('cart-count')).toHaveText(String(before + 1));
}

async function fillCheckout(page: Page, card: string): Promise<string> {
  await page.goto('/checkout');
  await page.getByTestId('email-input').fill('qa@example.com');
  await page.getByTestId('card-number-input').fill(card);
  return page.getByTestId('idempotency-key-input').inputValue(); // the key this form will pay under
}

// Pressed by position: a locator's click would wait for the navigation the first press started.
async function centreOfPay(page: Page): Promise<[number, number]> {
  const box = (await page.getByTestId('pay-button').boundingBox())!;
  return [box.x + box.width / 2, box.y + box.height / 2];
}

function countPosts(page: Page): Request[] {
  const sent: Request[] = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/checkout')) sent.push(request);
  });
  return sent;
}

async function listedOrders(page: Page): Promise<string[]> {
  await page.goto('/orders?lang=en');
  await expect(page.getByRole('heading', { name: 'Your orders' })).toBeVisible();
  return page.locator('table.lines tbody code').allInnerTexts();
}

// --- the tests ----------------------------------------------------------------------------------------------------

test('a double click on Pay sends one payment and places one order', async ({ page }) => {
  await addToCart(page);
  const key = await fillCheckout(page, SLOW_CARD);
  const posts = countPosts(page);
  const [x, y] = await centreOfPay(page);
  const first = page.waitForRequest((request) => request.method() === 'POST');
  await page.mouse.click(x, y);
  await first;
  if (await lab(page)) await waitForRequests(page, key, 1); // the first press is at the shop, held by the slow card
  await page.mouse.click(x, y); // the second press of the double click, while the first is paying
  const orderId = await onTheOrder(page);
  expect(posts).toHaveLength(1); // the Pay button guard: the second press sent nothing
  await expect(page.getByTestId('replay-notice')).toHaveCount(0);
  expect(await listedOrders(page)).toEqual([orderId]);
  if (await lab(page)) expect(await received(page, key)).toHaveLength(1);
  await chargedOnce(page, key, orderId);
});

test('with the button guard off, both presses reach the shop and it places one order', async ({ page }) => {
  test.skip(!(await lab(page)), 'counts through the shop\'s lab, which is off (GET /api/lab/ledger is not JSON)');
  await page.goto('/lab?lang=en');
  await page.getByTestId('guard-off').click(); // the lab's switch, for this browser only
  await addToCart(page);
  const key = await fillCheckout(page, SLOW_CARD);
  const [x, y] = await centreOfPay(page);
  await page.mouse.click(x, y);
  await waitForRequests(page, key, 1);
  await page.mouse.click(x, y); // nothing stops this one in the browser: the shop alone must
  const orderId = await onTheOrder(page);
  await expect(page.getByTestId('replay-notice')).toBeVisible();
  const both = await waitForRequests(page, key, 2);
  expect(both.map((r) => [r.status, r.replayed])).toEqual([[303, false], [303, true]]);
  expect(await listedOrders(page)).toEqual([orderId]);
  await chargedOnce(page, key, orderId);
});

test('without JavaScript, a second submit during a slow payment ends on the same order', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false }); // no script, so no button guard at all
  const page = await context.newPage();
  await addToCart(page);
  const key = await fillCheckout(page, SLOW_CARD);
  const posts = countPosts(page);
  const [x, y] = await centreOfPay(page);
  const first = page.waitForRequest((request) => request.method() === 'POST');
  await page.mouse.click(x, y);
  await first;
  if (await lab(page)) await waitForRequests(page, key, 1);
  await page.mouse.click(x, y); // a second real submit while the first is at the slow gateway
  const orderId = await onTheOrder(page);
  expect(posts).toHaveLength(2);
  await expect(page.getByTestId('replay-notice')).toBeVisible(); // answered with the first's order
  expect(await listedOrders(page)).toEqual([orderId]);
  if (await lab(page)) expect((await waitForRequests(page, key, 2)).map((r) => r.replayed)).toEqual([false, true]);
  await chargedOnce(page, key, orderId);
  await context.close();
});

test('two tabs that pay at once end on the one order', async ({ page }) => {
  await addToCart(page);
  const other = await page.context().newPage();
  const keys = [await fillCheckout(page, GOOD_CARD), await fillCheckout(other, GOOD_CARD)];
  expect(keys[1]).toBe(keys[0]); // one cart, one payment key, whichever tab shows it
  await Promise.all([page, other].map((tab) => tab.getByTestId('pay-button').click({ noWaitAfter: true })));
  const ended = [await onTheOrder(page), await onTheOrder(other)];
  expect(ended[1]).toBe(ended[0]);
  expect(await listedOrders(page)).toEqual([ended[0]]);
  await chargedOnce(page, keys[0], ended[0]);
});

test('Back, then Pay again, shows the order already placed', async ({ page }) => {
  await addToCart(page);
  const key = await fillCheckout(page, GOOD_CARD);
  await page.getByTestId('pay-button').click();
  const orderId = await onTheOrder(page);
  await page.goBack(); // the browser asks for the checkout again: the cart is paid, and the page says so
  await expect(page.getByTestId('already-paid')).toBeVisible();
  await page.getByTestId('card-number-input').fill(GOOD_CARD);
  await page.getByTestId('pay-button').click();
  expect(await onTheOrder(page)).toBe(orderId);
  await expect(page.getByTestId('replay-notice')).toBeVisible();
  expect(await listedOrders(page)).toEqual([orderId]);
  await chargedOnce(page, key, orderId);
});

test('the paid form, sent again, shows the same order', async ({ page }) => {
  await addToCart(page);
  const key = await fillCheckout(page, GOOD_CARD);
  // Chromium reloads the page on Back: keep the form as it was sent.
  const fields = await page.evaluate(
    () => Object.fromEntries(new FormData(document.getElementById('checkout-form') as HTMLFormElement)));
  await page.getByTestId('pay-button').click();
  const orderId = await onTheOrder(page);
  await page.evaluate((fields) => {
    const form = Object.assign(document.createElement('form'), { method: 'post', action: '/checkout' });
    for (const [name, value] of Object.entries(fields)) {
      form.appendChild(Object.assign(document.createElement('input'), { type: 'hidden', name, value }));
    }
    document.body.appendChild(form);
    form.submit();
  }, fields as Record<string, string>);
  expect(await onTheOrder(page)).toBe(orderId);
  await expect(page.getByTestId('replay-notice')).toBeVisible();
  expect(await listedOrders(page)).toEqual([orderId]);
  await chargedOnce(page, key, orderId);
});

test('a lost answer: the checkout again shows the same key, and Pay shows the order', async ({ page }) => {
  await addToCart(page);
  const key = await fillCheckout(page, GOOD_CARD);
  const cookies = await page.context().cookies();
  await page.route('**/checkout', async (route) => {
    if (route.request().method() !== 'POST') return route.continue();
    await route.fetch(); // the shop gets the payment and answers ...
    await route.abort(); // ... and the answer is lost on the way back
  });
  const failed = page.waitForEvent('requestfailed');
  await page.getByTestId('pay-button').click();
  await failed;
  await page.unroute('**/checkout');
  await page.context().clearCookies();
  await page.context().addCookies(cookies); // the lost answer's cookies never arrived either

  await page.goto('/checkout'); // the shopper never heard: the checkout again
  await expect(page.getByTestId('already-paid')).toBeVisible();
  expect(await page.getByTestId('idempotency-key-input').inputValue()).toBe(key); // the same payment
  await page.getByTestId('card-number-input').fill(GOOD_CARD);
  await page.getByTestId('pay-button').click();
  const orderId = await onTheOrder(page);
  await expect(page.getByTestId('replay-notice')).toBeVisible();
  expect(await listedOrders(page)).toEqual([orderId]);
  await chargedOnce(page, key, orderId);
});

test('a form whose cart changed meanwhile is out of date and charges nothing', async ({ page }) => {
  await addToCart(page);
  await fillCheckout(page, GOOD_CARD);
  const other = await page.context().newPage();
  await addToCart(other, 1); // the cart changes in another tab
  await other.close();
  await page.getByTestId('pay-button').click();
  await expect(page.getByRole('heading', { name: 'This checkout page is out of date' })).toBeVisible();
  expect(await listedOrders(page)).toEqual([]);
});
