// POST /api/orders with fetch (Node 18 and later, or a browser), retried until a final answer.
//
//     node examples/clients/fetch_retry.mjs http://127.0.0.1:5000 "4000 0000 0000 0077"
//
// What the setup says, line by line, is in docs/api.md ("Set up your client").
import { randomUUID } from "node:crypto";

const NOT_YET = new Set([502, 503, 504]); // the proxy's or the gateway's "not yet"; a 409 or 429 only with Retry-After
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

const [url, card] = process.argv.slice(2);
const body = JSON.stringify({ items: [{ sku: "MUG-01", quantity: 1 }], email: "alice@example.com", card_number: card });
const headers = {
  "Content-Type": "application/json",
  Authorization: "Bearer demo-alice-token",
  "Idempotency-Key": randomUUID(), // one key, the same on every try
};
let answer;
for (let attempt = 0; attempt < 9; attempt++) {
  try {
    answer = await fetch(`${url}/api/orders`, { method: "POST", body, headers, signal: AbortSignal.timeout(35_000) });
  } catch {
    answer = undefined;
    await sleep(Math.random() * Math.min(8000, 500 * 2 ** attempt)); // no answer: the same key finds what it did
    continue;
  }
  const asked = Number(answer.headers.get("Retry-After") ?? 0);
  const inProgress = [409, 429].includes(answer.status) && answer.headers.has("Retry-After"); // a final 409 has none
  if (!(NOT_YET.has(answer.status) || inProgress) || attempt === 8) break;
  await sleep(Math.max(asked * 1000, Math.random() * Math.min(8000, 500 * 2 ** attempt)));
}
console.log(JSON.stringify(answer ? { status: answer.status, body: await answer.json() } : { status: null }));
