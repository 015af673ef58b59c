// The official OpenAI client (npm `openai`, pinned in package.json) against a running
// `crescent serve`: node check.mjs BASE_URL (e.g. http://127.0.0.1:8000/v1).
// Prints one JSON object with what each call returned; exits non-zero on the first error.
// tests/system/openai_client_test.cpp runs it and checks what it printed.
import OpenAI from "openai";

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node check.mjs BASE_URL");
  process.exit(2);
}
// Crescent takes no key; the client insists on one.
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60_000 });

const out = {};
const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[0];

const prompt = "The quick brown fox";
const whole = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0 });
out.completion = { text: whole.choices[0].text, usage: whole.usage };

let streamed = "";
const stream = await client.completions.create({
  model, prompt, max_tokens: 8, temperature: 0, stream: true,
});
for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";
out.streamed_completion = streamed;

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "hello" }], max_tokens: 6, temperature: 0,
});
out.chat = { content: chat.choices[0].message.content, role: chat.choices[0].message.role };

let chatStreamed = "";
const chatStream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "hello" }], max_tokens: 6, temperature: 0,
  stream: true,
});
for await (const chunk of chatStream) chatStreamed += chunk.choices[0]?.delta?.content ?? "";
out.streamed_chat = chatStreamed;

// An error comes back as the client's typed error with the server's status and message.
try {
  await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0.7 });
  out.bad_request = "accepted";
} catch (e) {
  out.bad_request = { status: e.status, message: e.message };
}

console.log(JSON.stringify(out));
