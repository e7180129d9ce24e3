export * from "./FakeAnthropic.js"
export * from "./FakeOpenAi.js"
export * from "./FakeUpstream.js"
