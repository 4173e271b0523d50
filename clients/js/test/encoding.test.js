// Encoders and questions against the Python side (tests/vectors/encoding.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  buildBody,
  checkCollection,
  Encoder,
  encodeValues,
  loadQuestions,
  prepare,
  questionInfo,
  specFingerprint,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const vectors = JSON.parse(readFileSync(dir + 'encoding.json', 'utf8'));

test('labels map to items exactly as ldpkit.Encoder.encode does', () => {
  for (const c of vectors.encoders) {
    const enc = new Encoder(c.encoder);
    const where = JSON.stringify(c);
    if (c.error) assert.throws(() => enc.encode(c.labels), RangeError, where);
    else assert.deepEqual(enc.encode(c.labels), c.items, where);
    // the collection info carries the same encoder; encodeValues applies it
    if (!c.error) assert.deepEqual(encodeValues({ encoder: c.encoder }, c.labels), c.items, where);
  }
  // NaN is missing too (JSON cannot carry it)
  const enc = new Encoder({ categories: ['a'], unknown: 'other', missing: 'item' });
  assert.deepEqual(enc.encode([NaN, undefined, 'a', {}]), [2, 2, 0, 1]);
  assert.throws(() => new Encoder({ categories: [1, true] }), /distinct/);
  assert.throws(() => new Encoder({ categories: ['<other>'] }), /reserved/);
});

test('questions: same spec, same fingerprints, same prepared answers', async () => {
  for (const c of vectors.questions) {
    const info = await questionInfo(c.question);
    const where = c.question.name;
    assert.equal(info.fingerprint, c.fingerprint, where);
    assert.equal(info.question_fingerprint, c.question_fingerprint, where);
    assert.equal(await specFingerprint(c.question.spec), c.fingerprint, where);
    assert.deepEqual(prepare(info, c.answers), c.prepared, where);
    // and the body the collector would take: fingerprint and a report per answer
    const body = buildBody(info, prepare(info, c.answers));
    assert.equal(body.fingerprint, c.fingerprint, where);
    assert.equal(Object.values(body.arrays)[0].shape[0], c.answers.length, where);
    checkCollection(info, { name: where, fingerprint: c.fingerprint });
    assert.throws(() => checkCollection(info, { name: where, fingerprint: '0000' }), /must have the question's spec/);
  }
  const all = await loadQuestions(JSON.stringify({ question: vectors.questions.map((c) => c.question) }));
  assert.deepEqual(all.map((q) => q.fingerprint), vectors.questions.map((c) => c.fingerprint));
});

test('bad questions are refused with a message naming the problem', async () => {
  const q = vectors.questions[1].question; // numerical, clip = "clip"
  await assert.rejects(questionInfo({ ...q, extra: 1 }), /only have the keys/);
  await assert.rejects(questionInfo({ ...q, clip: 'wrap' }), /clip must be/);
  await assert.rejects(questionInfo({ ...q, spec: { mechanism: 'Nope', params: {} } }), /mechanism must be one of/);
  await assert.rejects(questionInfo({ ...q, spec: { mechanism: 'GRR', params: { epsilon: 1 } } }), /must include domain_size/);
  const strict = await questionInfo({ ...q, clip: 'error' });
  assert.throws(() => prepare(strict, [121]), /answers must lie in \[0, 120\]/);
  assert.throws(() => prepare(strict, [NaN]), /not missing/);
});
