export { secureCoins } from './random.js';
export { mix64, hashParameters, localHash, optimalHashRange } from './hashing.js';
export {
  GRR,
  OUE,
  OLH,
  HadamardResponse,
  HierarchicalHistogram,
  AutoDistribution,
  HH_BRANCHING,
  defaultBuckets,
  defaultHhShare,
  hhTopLevel,
  HH_MAX_NODES,
  MECHANISMS,
  fromSpec,
  OUE_MAX_EPSILON,
  RR_MAX_EPSILON,
  grrFromUniform,
  rrWeights,
  indexDtype,
  packBits,
  unaryThresholds,
} from './mechanisms.js';
export {
  DiscreteSquareWave,
  HybridMechanism,
  MIN_EPSILON,
  checkEpsilon,
  PiecewiseMechanism,
  SquareWave,
  StochasticRounding,
  ratioLoss,
  ratioWeights,
  roundHalfEven,
  roundToGrid,
  squareWaveBandwidth,
  uniformBelow,
} from './numeric.js';
export { PCKV, PaddingSampling, PrivKV, PrivSet, pckvUeLaw } from './sets.js';
export { exactRatio } from './exact.js';
export { blake2b } from './blake2b.js';
export {
  CMS,
  FLH,
  FLH_DEFAULT_MAX_RANGE,
  HCMS,
  ITEM_KEY_FORMAT,
  itemBytes,
  itemKey,
  rowHash,
} from './sketch.js';
export {
  Encoder,
  MISSING,
  OTHER,
  PARAMS,
  checkCollection,
  loadQuestions,
  normalizeSpec,
  prepare,
  pyDumps,
  pyFloatRepr,
  questionInfo,
  specFingerprint,
} from './question.js';
export {
  LETTERS,
  MAX_DEFAULT_RANGE,
  MAX_FRAGMENT_ITEMS,
  PEM,
  SFP,
  TABLE_WIDTH,
  TreeHist,
  encodeString,
  extendKey,
  familySeeds,
  hashKey,
  prefixKey,
} from './discovery.js';
export { buildBody, encodeValues, fetchSpec, send } from './client.js';
export { CALM, FullDomain, GroupMean, HDG, MULTIDIM, RSFD, SMP, SPL, TDG, UniformGrid } from './multidim.js';
export {
  LGRR,
  LOUE,
  LOSUE,
  LSUE,
  LSOUE,
  LOLOHA,
  DBitFlipPM,
  OneBitMean,
  LONGITUDINAL,
  lgrrWeights,
  longitudinalFromSpec,
  unaryRoundThresholds,
} from './longitudinal.js';
export {
  BudgetExceededError,
  DEVICE_FORMAT,
  Device,
  defaultStore,
  derivedWords,
  indexedDBStore,
  memoryStore,
  permanentKey,
  valueKey,
} from './device.js';
