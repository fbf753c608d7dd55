import { createCipheriv, createDecipheriv, createHash, createPrivateKey, createPublicKey, diffieHellman, generateKeyPair, generateKeyPairSync, hkdfSync, randomBytes, type X25519KeyPairOptions } from 'node:crypto';

/** AES-256-GCM: 12-byte IV, 16-byte tag; every ciphertext is base64(IV ‖ tag ‖ ciphertext) (docs/http-api.md#secrets). */
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** HKDF info of the test-secrets blob (SEC-6) and of the agent's secret outputs (SEC-5), as the stock agent uses them. */
export const UPLOAD_INFO = 'kici-upload-encryption';
export const SECRET_OUTPUT_INFO = 'kici-run-secret-outputs';

/** A ciphertext that does not open: wrong key, wrong AAD, tampered or malformed. Never carries the plaintext. */
export class DecryptError extends Error {
  override readonly name = 'DecryptError';
}

/**
 * The master key (`SWITCHYARD_SECRET_KEY`) and the one being retired (`SWITCHYARD_SECRET_KEY_OLD`).
 * A key's version is a fingerprint of the key itself, so a stored row names the key that sealed it.
 */
export interface MasterKeys {
  current: Buffer;
  old: Buffer | null;
}

export { parseMasterKey } from '../config/master-key.ts';

/** The version stored next to a ciphertext: the first 16 hex digits of SHA-256 over a label and the key. */
export function keyVersionOf(key: Buffer): string {
  return createHash('sha256').update('switchyard-master-key:').update(key).digest('hex').slice(0, 16);
}

export function encryptWithKey(key: Buffer, plaintext: Buffer | string, aad?: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  if (aad !== undefined) cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

export function decryptWithKey(key: Buffer, sealed: string, aad?: string): Buffer {
  const packed = Buffer.from(sealed, 'base64');
  if (packed.length < IV_BYTES + TAG_BYTES) throw new DecryptError(`ciphertext is ${packed.length} bytes; at least ${IV_BYTES + TAG_BYTES} are needed`);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, packed.subarray(0, IV_BYTES));
    decipher.setAuthTag(packed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    if (aad !== undefined) decipher.setAAD(Buffer.from(aad, 'utf8'));
    return Buffer.concat([decipher.update(packed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  } catch {
    throw new DecryptError('ciphertext does not decrypt (wrong key, wrong associated data, or tampered)');
  }
}

export interface Sealed {
  ciphertext: string;
  keyVersion: string;
}

/** Encrypts under the current master key; `aad` binds the ciphertext to its place (`scope:key` for a secret). */
export function seal(keys: MasterKeys, plaintext: Buffer | string, aad: string): Sealed {
  return { ciphertext: encryptWithKey(keys.current, plaintext, aad), keyVersion: keyVersionOf(keys.current) };
}

/** Opens a row sealed under the current or the old key (chosen by its version; both are tried for an unknown one). */
export function open(keys: MasterKeys, sealed: Sealed, aad: string): Buffer {
  const candidates = [keys.current, ...(keys.old ? [keys.old] : [])];
  const named = candidates.filter((key) => keyVersionOf(key) === sealed.keyVersion);
  for (const key of named.length > 0 ? named : candidates) {
    try {
      return decryptWithKey(key, sealed.ciphertext, aad);
    } catch (thrown) {
      if (!(thrown instanceof DecryptError)) throw thrown;
    }
  }
  const known = named.length > 0 ? 'its key' : 'neither SWITCHYARD_SECRET_KEY nor SWITCHYARD_SECRET_KEY_OLD';
  throw new DecryptError(`a value sealed under key version ${sealed.keyVersion} does not open with ${known}`);
}

export interface X25519Pair {
  /** base64 of the SPKI DER encoding: what `runPublicKey` and `publicKey` carry. */
  publicKey: string;
  /** PKCS#8 DER; stored only sealed under the master key. */
  privateKeyDer: Buffer;
}

const X25519_DER: X25519KeyPairOptions<'der', 'der'> = { publicKeyEncoding: { type: 'spki', format: 'der' }, privateKeyEncoding: { type: 'pkcs8', format: 'der' } };

const pairOf = (publicKey: Buffer, privateKeyDer: Buffer): X25519Pair => ({ publicKey: publicKey.toString('base64'), privateKeyDer });

export function generateX25519(): X25519Pair {
  const { publicKey, privateKey } = generateKeyPairSync('x25519', X25519_DER);
  return pairOf(publicKey, privateKey);
}

/** `generateX25519` on libuv's thread pool: a run key made for every run costs its coordinator's thread nothing. */
export function generateX25519InPool(): Promise<X25519Pair> {
  return new Promise((resolve, reject) => {
    generateKeyPair('x25519', X25519_DER, (error, publicKey, privateKey) => {
      if (error) reject(error);
      else resolve(pairOf(publicKey, privateKey));
    });
  });
}

function sharedKey(privateKeyDer: Buffer, peerPublicKey: string, info: string): Buffer {
  let peer;
  try {
    peer = createPublicKey({ key: Buffer.from(peerPublicKey, 'base64'), format: 'der', type: 'spki' });
  } catch {
    throw new DecryptError('the sender key is not a base64 SPKI DER public key');
  }
  if (peer.asymmetricKeyType !== 'x25519') throw new DecryptError(`the sender key is ${peer.asymmetricKeyType ?? 'unknown'}, not x25519`);
  const mine = createPrivateKey({ key: privateKeyDer, format: 'der', type: 'pkcs8' });
  const secret = diffieHellman({ privateKey: mine, publicKey: peer });
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, KEY_BYTES));
}

/** X25519 ECDH with the sender's key, HKDF-SHA256 (empty salt, `info`, 32 bytes), AES-256-GCM: the stock agent's and CLI's scheme. */
export function openEnvelope(privateKeyDer: Buffer, senderPublicKey: string, encrypted: string, info: string): Buffer {
  return decryptWithKey(sharedKey(privateKeyDer, senderPublicKey, info), encrypted);
}

/** The client side of `openEnvelope`: a fresh sender key, returned with the ciphertext. */
export function sealEnvelope(recipientPublicKey: string, plaintext: Buffer | string, info: string): { senderPublicKey: string; encrypted: string } {
  const sender = generateX25519();
  const key = sharedKey(sender.privateKeyDer, recipientPublicKey, info);
  return { senderPublicKey: sender.publicKey, encrypted: encryptWithKey(key, plaintext) };
}
