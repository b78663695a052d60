/** The two local HTTP providers, described once for the suites that run against both. */
import type { ProviderSettings } from "../../src/providers/settings.js"
import { url } from "../support/fakeCli.js"

export const reportedSource = "the model field of the server's response: reported by the server, not verified"

export const httpProviders = [
  {
    name: "ollama",
    model: "llama3.2:1b",
    path: "/api/generate",
    at: (base: string): Partial<ProviderSettings> => ({ ollamaUrl: url(base) }),
    body: (model: string, prompt: string) => ({ model, prompt, stream: false }),
    text: "the fake ollama answered ✓",
    usage: { prompt_eval_count: 7, eval_count: 9 }
  },
  {
    name: "openai",
    model: "qwen2.5-7b-instruct",
    path: "/v1/chat/completions",
    at: (base: string): Partial<ProviderSettings> => ({ openaiUrl: url(base) }),
    body: (model: string, prompt: string) => ({
      model,
      messages: [{ role: "user", content: prompt }],
      stream: false
    }),
    text: "the fake server answered ✓",
    usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 }
  }
] as const

/** A payload for provider `p`, with a prompt full of shell metacharacters by default. */
export const httpPayload = (
  p: (typeof httpProviders)[number],
  prompt = 'Say hi. $(rm -rf /) "quoted" ✓'
) => ({
  provider: p.name,
  model: p.model,
  prompt
})
