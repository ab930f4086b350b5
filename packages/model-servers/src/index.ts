// Scripted model servers on loopback for real agent CLIs: each speaks one provider's API (Anthropic
// Messages, OpenAI Responses, Gemini) and answers with the turns of a script, recording every request.
export { type AnthropicScriptOptions, startAnthropicScriptServer } from "./anthropic-server.ts";
export { type GeminiScriptOptions, startGeminiScriptServer } from "./gemini-server.ts";
export { type OpenAIScriptOptions, startOpenAIScriptServer } from "./openai-server.ts";
export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";
export { estimateTokens } from "./script.ts";
