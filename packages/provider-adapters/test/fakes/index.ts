export * from "./FakeAnthropic.js"
export * from "./FakeAudio.js"
export * from "./FakeOpenAi.js"
export * from "./FakeUpstream.js"
