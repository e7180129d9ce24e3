/**
 * The voices of the local speech engine (eSpeak NG 1.52-dev, as the `espeak-ng` package 1.0.2 embeds it): a language voice, such
 * as `en-us`, optionally with a variant, such as `en-us+f3` (a female voice) or `de+m3`. Names are matched ignoring
 * case. The lists are eSpeak's own (`espeak-ng --voices`, `--voices=variant`), minus the Klatt variants, which this
 * build lacks.
 */

/** The language voices. */
export const LANGUAGES: ReadonlyArray<string> = (
  "af am an ar as az ba be bg bn bpy bs ca chr-US-Qaaa-x-west cmn cmn-latn-pinyin cs cv cy da de el en-029 en-gb " +
  "en-gb-scotland en-gb-x-gbclan en-gb-x-gbcwmd en-gb-x-rp en-us en-us-nyc eo es es-419 et eu fa fa-latn fi fr-be " +
  "fr-ch fr-fr ga gd gn grc gu hak haw he hi hr ht hu hy hyw ia id io is it ja jbo ka kk kl kn ko kok ku ky la lb " +
  "lfn lt ltg lv mi mk ml mr ms mt mto my nb nci ne nl nog om or pa pap piqd pl pt pt-br py qdb qu quc qya ro ru " +
  "ru-cl ru-lv sd shn si sjn sk sl smj sq sr sv sw ta te th tk tn tr tt ug uk ur uz vi vi-vn-x-central " +
  "vi-vn-x-south yue"
).split(" ")

/** The variants a language voice takes after a `+`. */
export const VARIANTS: ReadonlyArray<string> = (
  "f1 f2 f3 f4 f5 m1 m2 m3 m4 m5 m6 m7 m8 croak whisper whisperf adam Alex Alicia Andrea Andy Annie anika " +
  "anikaRobot AnxiousAndy announcer antonio aunty belinda benjamin boris caleb david Demonic Denis Diogo ed " +
  "edward edward2 fast Gene Gene2 grandma grandpa gustave Henrique Hugo ian iven iven2 iven3 iven4 Jacky john " +
  "kaukovalta Lee linda marcelo Marco Mario max Michael michel miguel Mike mike2 Nguyen norbert pablo paul pedro " +
  "quincy Reed RicishayMax RicishayMax2 RicishayMax3 rob robert robosoft robosoft2 robosoft3 robosoft4 robosoft5 " +
  "robosoft6 robosoft7 robosoft8 sandro shelby steph steph2 steph3 Storm travis Tweaky UniRobot victor zac"
).split(" ")

/** The voice when a request names none. */
export const DEFAULT_VOICE = "en-us"

/** The voices the catalogue lists for the local engine: every language, and a few English variants. */
export const CATALOGUE_VOICES: ReadonlyArray<string> = [
  ...LANGUAGES,
  "en-us+f3",
  "en-us+m3",
  "en-gb+f2",
  "en-gb-x-rp+m2",
  "en-us+whisper"
]

const languages = new Map(LANGUAGES.map((v) => [v.toLowerCase(), v] as const))
const variants = new Map(VARIANTS.map((v) => [v.toLowerCase(), v] as const))

/** The engine's name of a voice (`EN-US+F3` gives `en-us+f3`), or undefined when it has no such voice. */
export const resolve = (voice: string | undefined): string | undefined => {
  if (voice === undefined) return DEFAULT_VOICE
  const plus = voice.indexOf("+")
  const language = languages.get((plus < 0 ? voice : voice.slice(0, plus)).toLowerCase())
  if (language === undefined) return undefined
  if (plus < 0) return language
  const variant = variants.get(voice.slice(plus + 1).toLowerCase())
  return variant === undefined ? undefined : `${language}+${variant}`
}
